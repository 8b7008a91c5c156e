// The workspace drivers' package: where an attempt or an evaluation runs on this host.

// Package workspace is the seam between a run's parts and the runtime:
// the Workspace an attempt runs in (a directory of this host, or a
// container with its own filesystem), chosen once when the worker is
// assembled; the Sandbox around each task (its one door out, its output,
// memory and workspace bounds, its size watched); the files of an
// attempt (Attempt) and of an evaluation (EvalDirs) as the driver lays
// them out. It speaks the driver's own types: what an attempt or an
// evaluation means stays in activities.
package workspace
