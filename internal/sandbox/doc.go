// Package sandbox is a wing of internal/: what an agent runs in and the
// one door it has. runtime (processes and containers behind one driver
// interface), gateway (the attempt's door: the LLM APIs metered, CONNECT
// to the allow-list), transcript (every call and connection
// recorded) and attach (a person in a run's container, on the worker's
// clock). It may import the run and store wings.
package sandbox
