// Package process is a wing of internal/: the binaries' plumbing. app
// (a worker process assembled), cli (cobra, config from flags, exit
// codes), devserver (the embedded Temporal server and Web UI), agentcmd
// (the reference agent's subcommands), and the leaf helpers every wing
// may use: every (a ticker loop) and ports (ports held for a server's
// life). It may import anything.
package process
