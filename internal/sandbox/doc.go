// Package sandbox is a wing of internal/: what an agent runs in, the
// one door it has, and what the host records of it. runtime (processes
// and containers behind one driver interface), gateway (the attempt's
// door: the LLM APIs metered, CONNECT to the allow-list), transcript
// (every call and connection recorded), observe (the agent's processes,
// GPUs, experiments and measures, sampled from the host) and attach (a
// person in a run's container, on the worker's clock). It stands on
// floor 3.
package sandbox
