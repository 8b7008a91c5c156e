// Package process is a wing of internal/: the binaries' plumbing. app
// (a worker process assembled), cli (cobra, config from flags, exit
// codes), devserver (the embedded Temporal server and Web UI), agentcmd
// (the reference agent's subcommands) and certify (an agent certified in
// a worker of its own). It stands above activities and workflows, on
// floor 9, under the binaries alone.
package process
