// Package research is a wing of internal/: what an agent did, seen
// from the host, and the documents made of it. observe (processes,
// GPUs, experiments and measures), report (the static HTML report) and
// export (tables for notebooks, Every Eval Ever records). It may import
// the run, store, sandbox and scoring wings.
package research
