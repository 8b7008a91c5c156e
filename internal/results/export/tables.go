// The export's tables: rows and the schema from their tags.

// Package export writes a benchmark as tables for notebooks: runs,
// attempts, checkpoints, curve marks, LLM calls and connections, and
// metric scores, in Parquet or CSV. The row types below are the schema:
// a column is added at the end of its table and never renamed or
// removed within a SchemaVersion; its doc tag documents it
// (docs/use/results.md, printed by `starter export --schema`).
package export

import "time"

// SchemaVersion is written beside every export (schema.json).
const SchemaVersion = 1

// RunRow is one row per run.
type RunRow struct {
	BenchmarkID string   `parquet:"benchmark_id" doc:"the benchmark the run belongs to"`
	RunID       string   `parquet:"run_id" doc:"the run's workflow id"`
	Task        string   `parquet:"task" doc:"task id"`
	Agent       string   `parquet:"agent" doc:"agent name"`
	Seed        int64    `parquet:"seed" doc:"seed"`
	Outcome     string   `parquet:"outcome" doc:"scored, limit_reached, agent_failed, infra_failed, evaluation_failed, canceled, disqualified or hacked (a reviewer's verdict)"`
	Score       *float64 `parquet:"score,optional" doc:"the final model's score; empty when the run has none (never 0 for a failure)"`
	Reason      string   `parquet:"reason" doc:"why the run ended so, when its outcome does not say"`
	Attempts    int64    `parquet:"attempts" doc:"agent attempts"`
	Checkpoints int64    `parquet:"checkpoints" doc:"committed checkpoints"`
	EvalTries   int64    `parquet:"evaluation_attempts" doc:"evaluations of the final model"`
	TimeLimitS  float64  `parquet:"time_limit_s" doc:"the budget before extensions, seconds"`
	GrantedS    float64  `parquet:"granted_s" doc:"the budget with extensions and refunds, seconds"`
	AgentS      float64  `parquet:"agent_s" doc:"agent time used, seconds"`
	LostS       float64  `parquet:"lost_s" doc:"agent time lost to crashes (refunded), seconds"`
	InfraWaitS  float64  `parquet:"infra_wait_s" doc:"time waiting for a slot or host, seconds"`
	GPUHours    float64  `parquet:"gpu_hours" doc:"GPU hours used by the agent"`
	BilledGPUH  float64  `parquet:"billed_gpu_hours" doc:"GPU hours held for the run"`
	LLMCalls    int64    `parquet:"llm_calls" doc:"LLM calls through the gateway"`
	LLMTokens   int64    `parquet:"llm_tokens" doc:"tokens billed, all kinds"`
	LLMUSD      float64  `parquet:"llm_usd" doc:"measured LLM cost, USD, under llm_prices"`
	LLMPrices   string   `parquet:"llm_prices" doc:"the price table's date and SHA-256"`
	Hardware    string   `parquet:"hardware" doc:"hardware class (CPU, 1× A100-40GB)"`
	SpecHash    string   `parquet:"spec_hash" doc:"the task spec's hash"`
	AgentImage  string   `parquet:"agent_image" doc:"agent image digest (containers)"`
	EvalImage   string   `parquet:"evaluator_image" doc:"the evaluator that scored: its image digest or its binary's hash; the reference evaluator's scoring code's hash"`
	AgentHash   string   `parquet:"agent_definition_hash" doc:"the agent definition's hash (agents/NAME.yaml, its description aside)"`
	Provider    string   `parquet:"provider" doc:"the LLM provider the agent was given"`
	Model       string   `parquet:"model" doc:"the model the agent was given (MLRB_MODEL)"`
	GPUUSD      *float64 `parquet:"gpu_usd,optional" doc:"billed GPU hours at the GPU price table, USD; empty when its GPU type has no price"`
	GPUPrices   string   `parquet:"gpu_prices" doc:"the GPU price table's date and SHA-256, and the rate used"`
	Experiments int64    `parquet:"experiments" doc:"experiments the worker saw the agent run (processes past observe.min_experiment or on a GPU)"`
	ExpPerHour  float64  `parquet:"experiments_per_hour" doc:"experiments per hour of agent time"`
	GPUBusy     *float64 `parquet:"gpu_busy_share,optional" doc:"the leased GPUs' mean utilisation over the budget; empty when no GPU was sampled"`
	FirstModelS *float64 `parquet:"first_model_s,optional" doc:"agent time of the first checkpoint holding a model; empty when none did"`
	StallS      float64  `parquet:"longest_stall_s" doc:"longest agent time with no experiment running and no LLM call"`
	NoModelGPUH float64  `parquet:"gpu_hours_no_model" doc:"GPU hours in experiments after which no model came"`
	CutOffHours float64  `parquet:"cut_off_hours" doc:"hours of experiments cut off by the deadline"`
}

// AttemptRow is one row per agent attempt.
type AttemptRow struct {
	RunID      string    `parquet:"run_id" doc:"the run"`
	N          int64     `parquet:"attempt" doc:"attempt number, from 1"`
	Host       string    `parquet:"host" doc:"the host it ran on"`
	LeaseWaitS float64   `parquet:"lease_wait_s" doc:"wait for its slot, seconds"`
	LeasedAt   time.Time `parquet:"leased_at" doc:"when it got its slot (UTC)"`
	EndedAt    time.Time `parquet:"ended_at" doc:"when it ended (UTC)"`
	FromS      float64   `parquet:"from_agent_s" doc:"agent time it started from (a resume: the last checkpoint's)"`
	ToS        float64   `parquet:"to_agent_s" doc:"agent time the run had used when it ended"`
	LostS      float64   `parquet:"lost_s" doc:"agent time it lost (run past the last checkpoint)"`
	End        string    `parquet:"end" doc:"exited, deadline, llm_budget, canceled, handed_back, lost or failed"`
	Detail     string    `parquet:"detail" doc:"exit code or error"`
}

// CheckpointRow is one row per committed checkpoint.
type CheckpointRow struct {
	RunID    string    `parquet:"run_id" doc:"the run"`
	Seq      int64     `parquet:"seq" doc:"checkpoint number"`
	Attempt  int64     `parquet:"attempt" doc:"the attempt that committed it"`
	At       time.Time `parquet:"at" doc:"commit time (UTC)"`
	AgentS   float64   `parquet:"agent_s" doc:"agent time it holds, seconds"`
	Files    int64     `parquet:"files" doc:"files in the workspace"`
	Bytes    int64     `parquet:"bytes" doc:"workspace bytes"`
	NewBytes int64     `parquet:"new_bytes" doc:"bytes stored anew (the rest deduplicated)"`
	Final    bool      `parquet:"final" doc:"taken when the agent ended"`
}

// MarkRow is one row per point of a run's score over time.
type MarkRow struct {
	RunID   string   `parquet:"run_id" doc:"the run"`
	Task    string   `parquet:"task" doc:"task id"`
	Agent   string   `parquet:"agent" doc:"agent name"`
	Seed    int64    `parquet:"seed" doc:"seed"`
	AtS     float64  `parquet:"mark_s" doc:"the mark, agent seconds"`
	Seq     int64    `parquet:"seq" doc:"the checkpoint evaluated (0: none by then)"`
	AgentS  float64  `parquet:"agent_s" doc:"agent time the checkpoint holds, seconds"`
	Score   *float64 `parquet:"score,optional" doc:"the checkpoint's score; empty with no model yet or a failed evaluation"`
	Best    *float64 `parquet:"best,optional" doc:"best score at or before the mark"`
	NoModel string   `parquet:"no_model" doc:"why there was no model yet (never scored 0)"`
	Error   string   `parquet:"error" doc:"the evaluation's error, if it never succeeded"`
	Split   string   `parquet:"split" doc:"held-out split scored: test, or the task's dev split"`
	Tries   int64    `parquet:"tries" doc:"evaluations of the checkpoint"`
	CostUSD *float64 `parquet:"cost_usd,optional" doc:"what the run had cost by the mark: GPUs at the price table and LLM calls, USD; empty when its GPUs have no price"`
}

// CallRow is one row per recorded LLM call or connection.
type CallRow struct {
	RunID        string    `parquet:"run_id" doc:"the run"`
	Attempt      int64     `parquet:"attempt" doc:"the attempt that made it"`
	Seq          int64     `parquet:"seq" doc:"its number within the attempt"`
	Kind         string    `parquet:"kind" doc:"llm or connect"`
	Start        time.Time `parquet:"start" doc:"when it started (UTC)"`
	LatencyMS    float64   `parquet:"latency_ms" doc:"the whole call"`
	FirstByteMS  float64   `parquet:"first_byte_ms" doc:"to the answer's first byte"`
	API          string    `parquet:"api" doc:"openai.chat.completions, openai.responses or anthropic.messages"`
	Model        string    `parquet:"model" doc:"model asked for"`
	Status       int64     `parquet:"status" doc:"HTTP status returned to the agent"`
	Error        string    `parquet:"error" doc:"why the gateway refused or failed it"`
	InputTokens  int64     `parquet:"input_tokens" doc:"uncached input tokens"`
	CacheRead    int64     `parquet:"cache_read_tokens" doc:"input tokens read from the provider's cache"`
	CacheWrite   int64     `parquet:"cache_write_tokens" doc:"input tokens written to it"`
	OutputTokens int64     `parquet:"output_tokens" doc:"output tokens (reasoning included)"`
	USD          float64   `parquet:"usd" doc:"its cost under the run's price table"`
	Host         string    `parquet:"host" doc:"a connection's destination"`
	Sent         int64     `parquet:"sent_bytes" doc:"a connection's bytes out"`
	Received     int64     `parquet:"received_bytes" doc:"a connection's bytes in"`
}

// ScoreRow is one row per metric of a run's final evaluation.
type ScoreRow struct {
	RunID  string  `parquet:"run_id" doc:"the run"`
	Task   string  `parquet:"task" doc:"task id"`
	Agent  string  `parquet:"agent" doc:"agent name"`
	Seed   int64   `parquet:"seed" doc:"seed"`
	Metric string  `parquet:"metric" doc:"metric name (lm-eval task and field, constraints/…)"`
	Value  float64 `parquet:"value" doc:"its value"`
}

// ExperimentRow is one row per experiment the worker saw the agent run.
type ExperimentRow struct {
	RunID      string    `parquet:"run_id" doc:"the run"`
	Task       string    `parquet:"task" doc:"task id"`
	Agent      string    `parquet:"agent" doc:"agent name"`
	Seed       int64     `parquet:"seed" doc:"seed"`
	Attempt    int64     `parquet:"attempt" doc:"the attempt it ran in"`
	PID        int64     `parquet:"pid" doc:"its process id on the host"`
	Command    string    `parquet:"command" doc:"its command line, secrets scrubbed, capped"`
	Start      time.Time `parquet:"start" doc:"when it started (UTC)"`
	End        time.Time `parquet:"end" doc:"when it was last seen (UTC)"`
	StartS     float64   `parquet:"start_agent_s" doc:"the run's agent time at its start"`
	EndS       float64   `parquet:"end_agent_s" doc:"the run's agent time at its end"`
	CPUS       float64   `parquet:"cpu_s" doc:"CPU seconds"`
	PeakRSS    int64     `parquet:"peak_rss_bytes" doc:"peak resident memory"`
	GPUMiB     float64   `parquet:"gpu_mib" doc:"most GPU memory the driver reported for it"`
	GPUHours   float64   `parquet:"gpu_hours" doc:"its time on the leased GPUs"`
	MeanUtil   *float64  `parquet:"mean_gpu_util,optional" doc:"the leased GPUs' mean utilisation while it ran, percent"`
	Outcome    string    `parquet:"outcome" doc:"ended, oom_killed, cut_off (by the deadline or LLM budget), lost (with an infra failure) or canceled"`
	ModelSeq   int64     `parquet:"model_checkpoint" doc:"the next checkpoint, when it added a model (0: none)"`
	ModelPath  string    `parquet:"model_path" doc:"that model's directory, from the agent's work dir"`
	ModelScore *float64  `parquet:"model_score,optional" doc:"that model's score, from the first scored checkpoint that still held it"`
	ModelSplit string    `parquet:"model_split" doc:"the split model_score is on"`
}

// GPUSampleRow is one row per sample of a leased GPU.
type GPUSampleRow struct {
	RunID   string    `parquet:"run_id" doc:"the run"`
	Attempt int64     `parquet:"attempt" doc:"the attempt that held it"`
	At      time.Time `parquet:"at" doc:"when it was sampled (UTC)"`
	AgentS  float64   `parquet:"agent_s" doc:"the run's agent time then"`
	Device  int64     `parquet:"device" doc:"the GPU's index on its host"`
	Util    float64   `parquet:"util" doc:"utilisation, percent"`
	MemMiB  float64   `parquet:"mem_mib" doc:"memory used, MiB"`
	PowerW  *float64  `parquet:"power_w,optional" doc:"power draw, W; empty where the GPU does not report it"`
}
