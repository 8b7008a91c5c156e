// Package results is a wing of internal/: what runs left, read back and
// shown. runresults (each run's stored result and the one place it is
// completed), board (what a leaderboard shows of a benchmark), review (a
// reviewer's flags and verdicts), anchors, certificate (an agent's
// certification), resume (what a resumed benchmark keeps), leaderboard
// (rows, statistics, renderings), campaign (benchmarks pooled), report
// (the static HTML report) and export (tables for notebooks, Every Eval
// Ever records). It stands on floor 5.
package results
