// Key is one configuration key, everything about it in one row.

package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"
)

// Key is one configuration key, everything about it in one row: the
// defaults, the environment binding, the command-line flags, `config
// show` and the configuration page's table are all derived from Table.
type Key struct {
	Name    string // dotted, as in mlrb.yaml
	Default any    // its type is the key's: a time.Duration default makes a duration key
	// ShownAs replaces the default on the configuration page when it depends on the
	// machine (a hostname, a home directory).
	ShownAs string
	Flag    string // the command-line flag that sets it, if any
	Doc     string
}

// Env is the key's environment variable, the viper way.
func (k Key) Env() string { return EnvName(k.Name) }

// Table is every key mlrb accepts.
var Table = []Key{
	{Name: "temporal.address", Default: "127.0.0.1:7233", Flag: "address", Doc: "frontend host:port"},
	{Name: "temporal.namespace", Default: "default", Flag: "namespace", Doc: "namespace"},
	{Name: "temporal.task_queue", Default: "mlrb", Doc: "shared queue; hosts also poll `<queue>-host-<host.id>`"},
	{Name: "temporal.connect_timeout", Default: 5 * time.Second, Doc: "give up dialing after this"},
	{Name: "temporal.compression", Default: "auto", Doc: "gRPC request compression: gzip, none, or auto (none to a loopback address, where compressing costs CPU and saves nothing; gzip otherwise)"},
	{Name: "temporal.api_key", Default: "", Doc: "API key (Temporal Cloud), sent as a bearer token over TLS; secret, redacted by `config show`"},
	{Name: "temporal.tls.enabled", Default: false, Doc: "TLS with the system's CA roots (implied by any other `temporal.tls` key or an API key)"},
	{Name: "temporal.tls.ca_file", Default: "", Doc: "PEM CA bundle that signed the frontend's certificate (a private CA)"},
	{Name: "temporal.tls.cert_file", Default: "", Doc: "PEM client certificate for mutual TLS (with `temporal.tls.key_file`)"},
	{Name: "temporal.tls.key_file", Default: "", Doc: "PEM private key of `temporal.tls.cert_file`"},
	{Name: "temporal.tls.server_name", Default: "", Doc: "name to verify the frontend's certificate against (default: the host of temporal.address)"},
	{Name: "dev.state_dir", Default: defaultStateDir(), ShownAs: "~/.local/state/mlrb", Flag: "state-dir", Doc: "embedded server's SQLite, blobs, workspaces; the starter reads checkpoints and results from here too"},
	{Name: "dev.port", Default: 7233, Flag: "port", Doc: "embedded server's frontend port"},
	{Name: "dev.ui_port", Default: 8233, Flag: "ui-port", Doc: "embedded Web UI port (0: no UI)"},
	{Name: "storage.kind", Default: string(StorageFS), Doc: "blob store for checkpoints and results: `fs` or `s3`"},
	{Name: "storage.fs_root", Default: "", ShownAs: "<state>/blobs", Doc: "root of the `fs` store"},
	{Name: "storage.parallel", Default: 8, Doc: "chunk transfers in flight"},
	{Name: "storage.s3.bucket", Default: "", Doc: "S3 bucket"},
	{Name: "storage.s3.prefix", Default: "mlrb", Doc: "key prefix in the bucket"},
	{Name: "storage.s3.region", Default: "us-east-1", Doc: "S3 region"},
	{Name: "storage.s3.endpoint", Default: "", Doc: "custom endpoint (MinIO, versitygw …)"},
	{Name: "storage.s3.path_style", Default: false, Doc: "path-style addressing (most S3-compatible servers)"},
	{Name: "storage.s3.access_key_id", Default: "", Doc: "static key id; empty: the AWS credentials chain"},
	{Name: "storage.s3.secret_access_key", Default: "", Doc: "static secret key (redacted)"},
	{Name: "storage.s3.max_attempts", Default: 8, Doc: "tries per request, with backoff"},
	{Name: "checkpoint.interval", Default: 10 * time.Minute, Flag: "interval", Doc: "checkpoint period (the demo uses 3s)"},
	{Name: "checkpoint.chunk_size", Default: 4 << 20, Doc: "content-addressed chunk size, bytes"},
	{Name: "checkpoint.pack_small_files", Default: true, Doc: "store files under 1 MiB in shared packs, a request per pack instead of per file (manifest version 3); false while workers older than packs may still restore this deployment's checkpoints"},
	{Name: "checkpoint.keep", Default: 5, Doc: "checkpoints kept per run, plus the final one"},
	{Name: "checkpoint.alert_after", Default: 3, Doc: "failed checkpoints in a row before status says stale"},
	{Name: "checkpoint.gc_grace", Default: time.Hour, Doc: "GC spares unreferenced chunks younger than this"},
	{Name: "checkpoint.exclude", Default: []string{"root/.cache/huggingface/token", "root/.cache/huggingface/stored_tokens"}, Doc: "workspace paths (globs, one path each) never checkpointed: credentials such as the Hugging Face token files"},
	{Name: "agent.heartbeat_timeout", Default: time.Minute, Flag: "hb-timeout", Doc: "a silent attempt is declared lost after this"},
	{Name: "agent.grace", Default: time.Minute, Flag: "grace", Doc: "SIGTERM this long before the deadline (at most a quarter of the budget)"},
	{Name: "agent.controls_every", Default: 5 * time.Second, Doc: "how often a worker reads each running attempt's controls (an extension, a cancel) from its run: a query each, answered off the loop that keeps the deadlines; an extension read after the SIGTERM is too late"},
	{Name: "agent.max_infra_attempts", Default: 5, Flag: "infra-tries", Doc: "attempts before `infra_failed`"},
	{Name: "agent.lease_timeout", Default: 24 * time.Hour, Doc: "wait for a free slot before `infra_failed`"},
	{Name: "agent.provider", Default: "none", Flag: "provider", Doc: "LLM provider the agent is told (`PROVIDER`); agent mlrb: openai or anthropic"},
	{Name: "agent.workspace_max_entries", Default: 500000, Doc: "an attempt's workspace may not hold more entries (files, directories, links; every name of a hard-linked file) than this (0: no limit); over it, the agent is killed and the run ends `agent_failed`: each entry is a line of every checkpoint's manifest (a conda environment is about 100,000)"},
	{Name: "agent.workspace_limit_gb", Default: 100.0, Doc: "an attempt's workspace on disk (and a container's writable layer) may not outgrow this (0: no limit); over it, the agent is killed and the run ends `agent_failed` naming the limit; every file, and every further name of a hard-linked file, counts at least 4 KiB and a sparse file its apparent size; real workspaces are 15 to 30 GB"},
	{Name: "agent.log_limit_mb", Default: int64(1024), Doc: "what is kept of an attempt's (or an evaluation's) output, in MiB; past it the rest is dropped with a line saying so (0: no limit)"},
	{Name: "agent.env_file", Default: "", Doc: "worker-side secrets (`KEY=value`) that runs name with `--secret`: the only place secret values come from (never the worker's environment; `MLRB_*`, `AWS_*` and `TEMPORAL_*` names are refused)"},
	{Name: "agent.secret_names", Default: []string{}, Doc: "if set, the only secret names runs may ask for (an allow-list over `agent.env_file`)"},
	{Name: "human.listen", Default: "127.0.0.1:0", Doc: "this worker's attach server, where people reach their runs' shells through `starter attach` (TLS, pinned to the worker's own certificate in `host.work_dir`); port 0 picks one, published in the hosts register; `\"\"`: none here"},
	{Name: "human.advertise", Default: "", ShownAs: "human.listen as bound", Doc: "the address people reach the attach server at (a public name or a load balancer), put in the credentials `starter invite` prints"},
	{Name: "human.release_after", Default: 30 * time.Minute, Doc: "a person's pause longer than this checkpoints their work and gives the GPU back until they start their clock again"},
	{Name: "human.wait_limit", Default: 14 * 24 * time.Hour, Doc: "how long a person's run waits for its person (at its start, after a release) before it ends with what they left"},
	{Name: "gateway.allow", Default: DefaultEgress, Doc: "where an agent (or evaluator) container may connect, as HTTPS through its door (`HTTPS_PROXY`), each connection recorded in the run's transcript: `host:port` patterns (`*.hf.co:443`), literal IPs or CIDRs (`10.0.0.0/24:443`); never loopback, link-local (the metadata service), this host's addresses or this deployment's endpoints (temporal, store, metrics); `[]`: nowhere"},
	{Name: "gateway.prices", Default: "", ShownAs: "the built-in table", Doc: "LLM price table (YAML: `date`, and per model `names`, `input`, `output`, `cache_read`, `cache_write` in USD per million tokens, `max_output_tokens`); its date and SHA-256 are stored with every result; a model it does not price is refused"},
	{Name: "gateway.anthropic_beta", Default: []string{}, Doc: "`anthropic-beta` header values passed to the provider (a beta may change rates, as the 1M context does: price it in `gateway.prices` first); a call with any other is refused, as are input by reference (URLs, file ids), service tiers above the table's rates and cache writes longer than 5 minutes"},
	{Name: "gateway.server_tools", Default: false, Doc: "let provider-side tools through (OpenAI's web search, MCP, code interpreter; Anthropic's web search and fetch, code execution, MCP servers): off by default, as they reach past `gateway.allow` and bill outside the run's ledger and budget"},
	{Name: "gateway.body_timeout", Default: time.Minute, Doc: "how long an agent's LLM call may take to send its request body; a call still sending then is refused (408), so that a slow sender holds none of the worker's memory past it"},
	{Name: "gateway.max_refused", Default: 100000, Doc: "how many calls and connections an attempt's door may refuse (a wrong token, an unpriced model, the allow-list, the budget; never a 429, which is backpressure an SDK retries) before the attempt is stopped as the agent's failure naming this limit: a flood of refused calls holds the worker, a well-behaved agent stays far below it"},
	{Name: "gateway.max_refused_mb", Default: 4096, Doc: "how many MiB of request bodies an attempt's door may read and refuse before the attempt is stopped as the agent's failure naming this limit: refusals are bounded in bytes as well as in count (of each, only the first 4 KiB and a hash are kept)"},
	{Name: "gateway.max_records", Default: 1000000, Doc: "how many records (calls and connections) an attempt's transcript may hold; past it, calls the provider did not bill are counted in one record and the attempt is stopped as the agent's failure naming this limit (429s count too: each second's are one record)"},
	{Name: "gateway.max_connections", Default: 128, Doc: "connections to an attempt's door open at once; more wait in the kernel's backlog, never in the worker's memory"},
	{Name: "gateway.usage_every", Default: time.Minute, Doc: "the least time between two reports of an attempt's LLM ledger to its run, each an event in the run's history (at least 1s): the history grows with time, never with the calls an agent makes"},
	{Name: "gateway.openai_url", Default: "https://api.openai.com/v1", Doc: "where the gateway sends OpenAI calls (chat completions, Responses)"},
	{Name: "gateway.anthropic_url", Default: "https://api.anthropic.com", Doc: "where the gateway sends Anthropic calls (messages)"},
	{Name: "gateway.openai_key", Default: "OPENAI_API_KEY", Doc: "the name of the OpenAI key in `agent.env_file`; the key stays on the worker (agents get a per-attempt token)"},
	{Name: "gateway.anthropic_key", Default: "ANTHROPIC_API_KEY", Doc: "the name of the Anthropic key in `agent.env_file`"},
	{Name: "eval.attempts", Default: 3, Flag: "eval-tries", Doc: "evaluation tries before the run waits for `retry-eval` (each bounded by the task's `evaluation.timeout`)"},
	{Name: "eval.curve", Default: []string{}, ShownAs: "the task's `evaluation.curve`", Doc: "marks of agent time (`1h`) or fractions of the budget (`0.25`) at which a run's checkpoints are scored after its final evaluation (its score over time); `[off]`: none"},
	{Name: "eval.data_dir", Default: "", Doc: "the directory holding the data sets tasks' evaluators read (their `evaluation.data`: a held-out set, at its name under this directory), mounted read-only into each evaluation; a run of a task whose data is missing here, or is not the version its spec hashes, is refused at its start naming the path and the hash"},
	{Name: "eval.wait_limit", Default: 72 * time.Hour, Doc: "how long it waits before ending `evaluation_failed`"},
	{Name: "host.id", Default: hostname(), ShownAs: "hostname", Flag: "host-id", Doc: "this host's id"},
	{Name: "host.gpu_devices", Default: []int{}, Doc: "GPU ids this host leases; empty means CPU only"},
	{Name: "host.gpu_type", Default: "", Doc: "e.g. `A100-40GB`; leases for another type go elsewhere"},
	{Name: "host.max_agents", Default: 4, Flag: "max-agents", Doc: "agents at once on this host"},
	{Name: "host.fence_interval", Default: time.Minute, Doc: "how often containers are checked against live attempts (`docker`)"},
	{Name: "host.lease_ttl", Default: 2 * time.Minute, Doc: "a slot whose holder stopped heartbeating (its run terminated, reset, lost) is free again after this; at least `agent.heartbeat_timeout`"},
	{Name: "host.preemption", Default: string(PreemptionNone), Doc: "what warns of this host being taken back: `none`, or `ec2-spot` (a spot interruption notice or rebalance recommendation from the instance metadata service hands the attempts back, as SIGTERM does)"},
	{Name: "host.imds_endpoint", Default: "", ShownAs: "the instance's", Doc: "instance metadata service address for `ec2-spot` (e.g. a simulator's `http://127.0.0.1:1338`)"},
	{Name: "host.dedicated", Default: false, Doc: "serve only this host's queue (set on the workers that provisioned jobs start)"},
	{Name: "host.stop_timeout", Default: 2 * time.Minute, Doc: "on SIGTERM, time the worker gives running agents to be stopped and checkpointed"},
	{Name: "host.work_dir", Default: "", ShownAs: "<state>/work", Doc: "workspaces"},
	{Name: "host.runtime", Default: string(RuntimeProcess), Doc: "how agents run: `process` or `docker`"},
	{Name: "host.agent_binary", Default: "", ShownAs: "`mlrb-agent` beside this binary, else this binary", Doc: "runs the built-in agents and the reference evaluator as processes (`process`); `mlrb-agent` (`task build`) starts in 1 ms, this binary, which embeds the Temporal server, in 30 ms of CPU"},
	{Name: "container.agent_image", Default: "mlrb-reference:dev", Doc: "image of the built-in agents"},
	{Name: "container.eval_image", Default: "mlrb-reference:dev", Doc: "evaluator image, unless a task names its own"},
	{Name: "container.paths", Default: []string{"/app", "/root/.cache/huggingface"}, Doc: "checkpointed container paths"},
	{Name: "container.workdir", Default: "/app/work", Doc: "`MLRB_WORKDIR` in the container"},
	{Name: "container.self", Default: "/mlrb", Doc: "the mlrb binary inside the images"},
	{Name: "container.memory_mb", Default: 0, Doc: "memory limit (0: the task's `resources.memory_gb`)"},
	{Name: "container.cpus", Default: 0, Doc: "CPU limit (0: none)"},
	{Name: "container.pids_limit", Default: 4096, Doc: "process limit (0: none)"},
	{Name: "container.gpus", Default: "nvidia", Doc: "how leased GPUs reach a container: `nvidia` (a device request to the NVIDIA container toolkit) or `devices` (the leased `/dev/nvidiaN` files, with `/dev/nvidiactl` and `/dev/nvidia-uvm` when present, as plain devices: hosts without the toolkit, or Slurm GRES)"},
	{Name: "container.user", Default: "65532:65532", Doc: "run agents and evaluators as `uid[:gid]` (numbers; their mounts are owned to it), never root on the host's files, nor a login account of the host (65532 is distroless' nonroot, no account on most hosts, where 1000 is the first user's); `image`: the image's own user (root in most: then use the daemon's userns-remap)"},
	{Name: "tasks.dir", Default: "", Flag: "tasks-dir", Doc: "extra task files, merged over the embedded catalog"},
	{Name: "agents.dir", Default: "", Flag: "agents-dir", Doc: "agent definitions (one `NAME.yaml` each: image or builtin, provider, model, env, secrets, args, llm_budget_usd), merged over the shipped ones in `agents/`; `starter agents list`"},
	{Name: "provision.kind", Default: string(ProvisionStatic), Doc: "how runs get GPU hosts: `static` (workers started by an operator), `slurm` (a batch job per attempt and per evaluation, running a worker for it; cancelled when it ends) or `ec2` (an instance likewise)"},
	{Name: "provision.margin", Default: 30 * time.Minute, Doc: "added to the budget left in a job's time limit (restore, final checkpoint)"},
	{Name: "provision.boot_timeout", Default: 20 * time.Minute, Doc: "a provisioned job or instance whose worker does not serve its lease within this is given back and another provisioned (an infra loss); a failed launch is retried with backoff up to `agent.lease_timeout`"},
	{Name: "provision.reap_interval", Default: time.Minute, Doc: "how often a worker cancels the jobs of runs that have ended"},
	{Name: "provision.slurm.worker", Default: []string{}, ShownAs: "this worker's binary", Doc: "the command a job runs; it inherits the submitting worker's environment"},
	{Name: "provision.slurm.partition", Default: "", Doc: "partition the jobs go to (\"\": the default)"},
	{Name: "provision.slurm.command_timeout", Default: 30 * time.Second, Doc: "bound on each sbatch, squeue and scancel; a submit that times out is looked for in the queue before it is tried again"},
	{Name: "provision.slurm.work_dir", Default: "", ShownAs: "<state>/slurm", Doc: "each job's workspaces and log, on the compute nodes at the same path"},
	{Name: "provision.ec2.region", Default: "us-east-1", Doc: "region the instances run in"},
	{Name: "provision.ec2.endpoint", Default: "", Doc: "EC2 API endpoint override (\"\": AWS's)"},
	{Name: "provision.ec2.ami", Default: "", Doc: "image with the worker and its config (temporal, storage) baked in"},
	{Name: "provision.ec2.instance_types", Default: []string{"A100-40GB=p4d.24xlarge", "A100-80GB=p4de.24xlarge", "H100-80GB=p5.48xlarge"}, Doc: "GPU type to instance type, as `GPU=TYPE`"},
	{Name: "provision.ec2.subnet_id", Default: "", Doc: "subnet of the instances"},
	{Name: "provision.ec2.security_groups", Default: []string{}, Doc: "security group ids of the instances"},
	{Name: "provision.ec2.spot", Default: false, Doc: "ask for spot capacity (one-time; an interruption hands the attempt back)"},
	{Name: "provision.ec2.worker", Default: "/usr/local/bin/mlrb-worker", Doc: "the worker command on the image, started by the user data"},
	{Name: "log.level", Default: "info", Flag: "log-level", Doc: "debug, info, warn or error"},
	{Name: "metrics.listen", Default: "", Flag: "metrics-listen", Doc: "host:port where the worker serves Prometheus metrics at `/metrics` (\"\": none), e.g. `127.0.0.1:9464`"},
	{Name: "observe.proc_interval", Default: 5 * time.Second, Doc: "how often an agent's processes are sampled from the host (its container's cgroup or its process tree): command, CPU, peak memory, OOM kills"},
	{Name: "observe.gpu_interval", Default: 30 * time.Second, Doc: "how often the leased GPUs are sampled (utilisation, memory, power, memory per process)"},
	{Name: "observe.gpu_command", Default: []string{"nvidia-smi"}, Doc: "the GPU query command, with any leading arguments; asked `--query-gpu=…` and `--query-compute-apps=…` with `--format=csv,noheader,nounits -i <leased ids>` (empty, or absent on the host: GPUs are not sampled)"},
	{Name: "observe.min_experiment", Default: time.Minute, Doc: "a process the agent ran counts as an experiment when it ran this long or touched a GPU"},
	{Name: "cost.gpu_prices", Default: "", ShownAs: "built in (dated)", Doc: "GPU price table: a YAML file of `date`, `source` and `gpus` (US dollars per GPU-hour by `host.gpu_type`); a run's billed GPU-hours are costed with it when its result is stored, which names the table (date, SHA-256) and the rate"},
	{Name: "bundle.signing_key", Default: "", Doc: "the operator's ed25519 private key (PEM; `starter keys new -o PREFIX` writes PREFIX and PREFIX.pub) that signs run bundles (`starter bundle`); give PREFIX.pub to whoever verifies them"},
	{Name: "metrics.fleet", Default: true, Doc: "also export the runs by phase and outcome, counted by the Temporal server (one visibility count per phase and outcome each scrape); turn off on all but one worker of a large fleet"},
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

func defaults() map[string]any {
	m := make(map[string]any, len(Table))
	for _, k := range Table {
		m[k.Name] = k.Default
	}
	return m
}

func durationKey(name string) bool {
	k, _ := Lookup(name)
	_, ok := k.Default.(time.Duration)
	return ok
}

// FlagKeys maps command-line flags to the keys they set.
func FlagKeys() map[string]string {
	m := map[string]string{}
	for _, k := range Table {
		if k.Flag != "" {
			m[k.Flag] = k.Name
		}
	}
	return m
}

// Shown is how the configuration page writes the key's default.
func (k Key) Shown() string {
	if k.ShownAs != "" {
		return k.ShownAs
	}
	switch v := k.Default.(type) {
	case string:
		if v == "" {
			return "—"
		}
	case time.Duration:
		s := v.String() // 10m0s, 1h0m0s: written 10m, 1h
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return "`" + s + "`"
	case []int, []string:
		return "`" + strings.ReplaceAll(fmt.Sprint(v), " ", ", ") + "`"
	}
	return "`" + fmt.Sprint(k.Default) + "`"
}

// Markdown is the configuration page's table (docs/operate/configuration.md).
func Markdown() string {
	var b strings.Builder
	b.WriteString("| key | default | env | flag | meaning |\n|---|---|---|---|---|\n")
	for _, k := range Table {
		flag := ""
		if k.Flag != "" {
			flag = "`--" + k.Flag + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s | %s |\n", k.Name, k.Shown(), k.Env(), flag, k.Doc)
	}
	return b.String()
}

// fieldPath is the Go path of the Config field a key decodes into
// ("Storage.S3.Bucket"), or "" when no field takes it.
func fieldPath(name string) string {
	t := reflect.TypeOf(Config{})
	var path []string
	for _, part := range strings.Split(name, ".") {
		found := false
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Tag.Get("mapstructure") == part {
				path, t, found = append(path, f.Name), f.Type, true
				break
			}
		}
		if !found {
			return ""
		}
	}
	return strings.Join(path, ".")
}
