// The host package's doc: the worker's machine as the activities see it.

// Package host is the machine a worker runs on, as every activity that
// runs there sees it: its GPU slots and their leases (Leases), its work
// disk and what its earlier workers left (Sweep), and the liveness each
// long activity beats with (heartbeats, self-fencing, lease renewal). It
// stands over the wire (activities) and under the attempt and the
// evaluation.
package host
