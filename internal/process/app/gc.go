// The Go garbage collector's target for a process that embeds the dev server.

package app

import (
	"os"
	"runtime/debug"
)

// gcPercent is the garbage collector's target of a process that embeds
// the dev server, unless GOGC says otherwise. The server allocates at a
// high rate: each call is decoded and encoded again as it passes from
// the frontend to the history and matching services, over loopback gRPC
// in the one process. At Go's default of 100 the collector took 7% of the
// server's CPU in the 350-run benchmark's profile. At 300 the heap may
// grow to four times what is live instead of two. Draining 1,000 runs in
// flight (one drain each) then took the server 63 CPU s and 492 MiB at
// peak, against 81 CPU s and 331 MiB; side by side, the 350-run
// benchmark's server CPU a run fell 6 to 10%. A process that only runs a
// worker keeps Go's default.
const gcPercent = 300

// tuneGC sets the process's GC target to gcPercent, unless the user set
// GOGC (which then stands, as Go reads it).
func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
}
