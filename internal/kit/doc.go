// Package kit is a wing of internal/: leaf helpers any part may use.
// every (a ticker loop) and ports (ports held for a server's life).
// It stands on floor 1 and imports nothing else of the module.
package kit
