// Package run is a wing of internal/: the vocabulary every part uses
// for a run and what it reports. runs (outcomes, phases, the result),
// budget (a run's time account), contract (what an agent gets and
// leaves), llm (LLM usage, prices and the budget meter) and gpucost (GPU
// prices). It stands on floor 1 and imports nothing else of the module:
// reading a result or a task pulls no engine in (layout_test.go holds it).
package run
