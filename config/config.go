// The typed Config: every section and its defaults.

// Package config holds mlrb's one typed Config, loaded by viper from
// defaults < mlrb.yaml < MLRB_* environment < flags, and validated.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mlrb/mlrb/tasks"
)

// DefaultEgress is where an agent may connect unless gateway.allow says
// otherwise: what MLRB's tasks fetch from (the Hugging Face hub and its
// CDNs, PyPI, GitHub).
var DefaultEgress = []string{"huggingface.co:443", "*.huggingface.co:443", "*.hf.co:443", "pypi.org:443", "files.pythonhosted.org:443",
	"github.com:443", "*.github.com:443", "*.githubusercontent.com:443"}

// Config is everything the starter and the worker can be told.
type Config struct {
	Temporal   Temporal   `mapstructure:"temporal" yaml:"temporal"`
	Dev        Dev        `mapstructure:"dev" yaml:"dev"`
	Storage    Storage    `mapstructure:"storage" yaml:"storage"`
	Checkpoint Checkpoint `mapstructure:"checkpoint" yaml:"checkpoint"`
	Agent      Agent      `mapstructure:"agent" yaml:"agent"`
	Eval       Eval       `mapstructure:"eval" yaml:"eval"`
	Host       Host       `mapstructure:"host" yaml:"host"`
	Tasks      Tasks      `mapstructure:"tasks" yaml:"tasks"`
	Agents     Agents     `mapstructure:"agents" yaml:"agents"`
	Container  Container  `mapstructure:"container" yaml:"container"`
	Provision  Provision  `mapstructure:"provision" yaml:"provision"`
	Log        Log        `mapstructure:"log" yaml:"log"`
	Metrics    Metrics    `mapstructure:"metrics" yaml:"metrics"`
	Gateway    Gateway    `mapstructure:"gateway" yaml:"gateway"`
	Observe    Observe    `mapstructure:"observe" yaml:"observe"`
	Cost       Cost       `mapstructure:"cost" yaml:"cost"`
	Bundle     Bundle     `mapstructure:"bundle" yaml:"bundle"`
	Human      Human      `mapstructure:"human" yaml:"human"`
}

// Gateway configures each worker's run gateway: the agents' one door out.
type Gateway struct {
	// Allow is where agent containers may connect (gateway.Policy).
	Allow []string `mapstructure:"allow" yaml:"allow"`
	// Prices is the LLM price table file ("": the built-in one).
	Prices string `mapstructure:"prices" yaml:"prices"`
	// OpenAIURL and AnthropicURL are where LLM calls go.
	OpenAIURL    string `mapstructure:"openai_url" yaml:"openai_url"`
	AnthropicURL string `mapstructure:"anthropic_url" yaml:"anthropic_url"`
	// OpenAIKey and AnthropicKey name the keys in agent.env_file.
	OpenAIKey    string `mapstructure:"openai_key" yaml:"openai_key"`
	AnthropicKey string `mapstructure:"anthropic_key" yaml:"anthropic_key"`
	// ServerTools lets provider-side tools through.
	ServerTools bool `mapstructure:"server_tools" yaml:"server_tools"`
	// AnthropicBeta are the anthropic-beta values passed on.
	AnthropicBeta []string `mapstructure:"anthropic_beta" yaml:"anthropic_beta"`
	// BodyTimeout bounds the time a call's request body takes to arrive.
	BodyTimeout time.Duration `mapstructure:"body_timeout" yaml:"body_timeout"`
	// UsageEvery is the least time between two usage reports of an attempt.
	UsageEvery time.Duration `mapstructure:"usage_every" yaml:"usage_every"`
	// MaxRefused, MaxRefusedMB, MaxRecords and MaxConnections are each
	// attempt's door allowance.
	MaxRefused     int64 `mapstructure:"max_refused" yaml:"max_refused"`
	MaxRefusedMB   int64 `mapstructure:"max_refused_mb" yaml:"max_refused_mb"`
	MaxRecords     int64 `mapstructure:"max_records" yaml:"max_records"`
	MaxConnections int   `mapstructure:"max_connections" yaml:"max_connections"`
}

// Provision says how runs obtain their GPU hosts.
type Provision struct {
	// Kind is static (workers someone started), slurm (a batch job per
	// attempt and per evaluation, each running a worker for it) or ec2 (an
	// instance likewise).
	Kind ProvisionKind `mapstructure:"kind" yaml:"kind"`
	// Margin is added to the budget left in a job's time limit.
	Margin time.Duration `mapstructure:"margin" yaml:"margin"`
	// BootTimeout bounds a provisioned host's boot (workflows.Policy).
	BootTimeout time.Duration `mapstructure:"boot_timeout" yaml:"boot_timeout"`
	// ReapInterval paces the reaper of jobs whose run has ended.
	ReapInterval time.Duration `mapstructure:"reap_interval" yaml:"reap_interval"`
	Slurm        Slurm         `mapstructure:"slurm" yaml:"slurm"`
	EC2          EC2           `mapstructure:"ec2" yaml:"ec2"`
}

// EC2 configures provision.kind ec2.
type EC2 struct {
	Region   string `mapstructure:"region" yaml:"region"`
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	AMI      string `mapstructure:"ami" yaml:"ami"`
	// InstanceTypes maps GPU types to instance types, as GPU=TYPE.
	InstanceTypes  []string `mapstructure:"instance_types" yaml:"instance_types"`
	SubnetID       string   `mapstructure:"subnet_id" yaml:"subnet_id"`
	SecurityGroups []string `mapstructure:"security_groups" yaml:"security_groups"`
	Spot           bool     `mapstructure:"spot" yaml:"spot"`
	Worker         string   `mapstructure:"worker" yaml:"worker"`
}

// InstanceTypes is provision.ec2.instance_types as a map.
func (p Provision) InstanceTypes() (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range p.EC2.InstanceTypes {
		gpu, itype, ok := strings.Cut(kv, "=")
		if !ok || gpu == "" || itype == "" {
			return nil, fmt.Errorf("provision.ec2.instance_types: %q is not GPU_TYPE=INSTANCE_TYPE (e.g. A100-40GB=p4d.24xlarge)", kv)
		}
		m[gpu] = itype
	}
	return m, nil
}

// Slurm configures provision.kind slurm.
type Slurm struct {
	// Worker is the command a job runs ([]: this worker's own binary).
	Worker    []string `mapstructure:"worker" yaml:"worker"`
	Partition string   `mapstructure:"partition" yaml:"partition"`
	// CommandTimeout bounds each Slurm command.
	CommandTimeout time.Duration `mapstructure:"command_timeout" yaml:"command_timeout"`
	// WorkDir holds each job's workspaces and log ("": <state>/slurm);
	// it must be on the compute nodes' disk at the same path.
	WorkDir string `mapstructure:"work_dir" yaml:"work_dir"`
}

// Temporal says where the Temporal frontend is.
type Temporal struct {
	Address        string        `mapstructure:"address" yaml:"address"`
	Namespace      string        `mapstructure:"namespace" yaml:"namespace"`
	TaskQueue      string        `mapstructure:"task_queue" yaml:"task_queue"`
	ConnectTimeout time.Duration `mapstructure:"connect_timeout" yaml:"connect_timeout"`
	Compression    Compression   `mapstructure:"compression" yaml:"compression"`
	APIKey         string        `mapstructure:"api_key" yaml:"api_key" secret:"true"`
	TLS            TemporalTLS   `mapstructure:"tls" yaml:"tls"`
}

// TemporalTLS secures the connection to the frontend: TLS with the
// system's roots, a private CA, or mutual TLS with a client certificate.
type TemporalTLS struct {
	// Enabled turns TLS on with the system's roots; any file below, or
	// temporal.api_key, turns it on too.
	Enabled    bool   `mapstructure:"enabled" yaml:"enabled"`
	CAFile     string `mapstructure:"ca_file" yaml:"ca_file"`
	CertFile   string `mapstructure:"cert_file" yaml:"cert_file"`
	KeyFile    string `mapstructure:"key_file" yaml:"key_file"`
	ServerName string `mapstructure:"server_name" yaml:"server_name"`
}

// UsesTLS tells whether the connection to the frontend is TLS.
func (t Temporal) UsesTLS() bool {
	return t.TLS.Enabled || t.TLS.CAFile != "" || t.TLS.CertFile != "" || t.TLS.ServerName != "" || t.APIKey != ""
}

// Dev configures the embedded server of `worker --dev` and `starter demo`.
type Dev struct {
	StateDir string `mapstructure:"state_dir" yaml:"state_dir"`
	Port     int    `mapstructure:"port" yaml:"port"`
	UIPort   int    `mapstructure:"ui_port" yaml:"ui_port"`
}

// Storage selects the blob store that holds checkpoints and results.
type Storage struct {
	Kind   StorageKind `mapstructure:"kind" yaml:"kind"`
	FSRoot string      `mapstructure:"fs_root" yaml:"fs_root"`
	S3     S3          `mapstructure:"s3" yaml:"s3"`
	// Parallel bounds chunk uploads and downloads in flight.
	Parallel int `mapstructure:"parallel" yaml:"parallel"`
}

// S3 is an S3 or S3-compatible store. Without keys the standard AWS
// credentials chain applies.
type S3 struct {
	Bucket          string `mapstructure:"bucket" yaml:"bucket"`
	Prefix          string `mapstructure:"prefix" yaml:"prefix"`
	Region          string `mapstructure:"region" yaml:"region"`
	Endpoint        string `mapstructure:"endpoint" yaml:"endpoint"`
	PathStyle       bool   `mapstructure:"path_style" yaml:"path_style"`
	AccessKeyID     string `mapstructure:"access_key_id" yaml:"access_key_id"`
	SecretAccessKey string `mapstructure:"secret_access_key" yaml:"secret_access_key" secret:"true"`
	MaxAttempts     int    `mapstructure:"max_attempts" yaml:"max_attempts"`
}

// Checkpoint tunes the checkpoint engine.
type Checkpoint struct {
	Interval  time.Duration `mapstructure:"interval" yaml:"interval"`
	ChunkSize int           `mapstructure:"chunk_size" yaml:"chunk_size"`
	// PackSmallFiles stores small files in shared packs.
	PackSmallFiles bool `mapstructure:"pack_small_files" yaml:"pack_small_files"`
	// Keep is how many checkpoints of a run retention keeps (plus the final).
	Keep int `mapstructure:"keep" yaml:"keep"`
	// AlertAfter consecutive failed checkpoints mark the run's status stale.
	AlertAfter int `mapstructure:"alert_after" yaml:"alert_after"`
	// GCGrace spares unreferenced chunks younger than this.
	GCGrace time.Duration `mapstructure:"gc_grace" yaml:"gc_grace"`
	// Exclude are path globs of a workspace never checkpointed.
	Exclude []string `mapstructure:"exclude" yaml:"exclude"`
}

// Agent tunes the agent activity.
type Agent struct {
	HeartbeatTimeout time.Duration `mapstructure:"heartbeat_timeout" yaml:"heartbeat_timeout"`
	// Grace is how long before the deadline the agent gets SIGTERM.
	Grace time.Duration `mapstructure:"grace" yaml:"grace"`
	// ControlsEvery paces the reads of a running attempt's controls.
	ControlsEvery    time.Duration `mapstructure:"controls_every" yaml:"controls_every"`
	MaxInfraAttempts int           `mapstructure:"max_infra_attempts" yaml:"max_infra_attempts"`
	// LeaseTimeout bounds the wait for a free slot before infra_failed.
	LeaseTimeout time.Duration `mapstructure:"lease_timeout" yaml:"lease_timeout"`
	Provider     string        `mapstructure:"provider" yaml:"provider"`
	// EnvFile holds secrets (KEY=value) on the worker; runs name the keys.
	EnvFile string `mapstructure:"env_file" yaml:"env_file"`
	// SecretNames, if set, are the only secret names runs may ask for.
	SecretNames []string `mapstructure:"secret_names" yaml:"secret_names"`
	// WorkspaceLimitGB bounds an attempt's workspace on disk (0: none).
	WorkspaceLimitGB float64 `mapstructure:"workspace_limit_gb" yaml:"workspace_limit_gb"`
	// WorkspaceMaxEntries bounds the entries of an attempt's workspace
	// (0: none): each is a line of every manifest.
	WorkspaceMaxEntries int64 `mapstructure:"workspace_max_entries" yaml:"workspace_max_entries"`
	// LogLimitMB bounds what is kept of an attempt's output (0: none).
	LogLimitMB int64 `mapstructure:"log_limit_mb" yaml:"log_limit_mb"`
}

// Eval tunes the evaluation activity.
type Eval struct {
	// Attempts is how often a failing evaluation is tried; the timeout of
	// each comes from the task's evaluation.timeout.
	Attempts int `mapstructure:"attempts" yaml:"attempts"`
	// WaitLimit is how long a run whose evaluation failed waits for
	// `starter retry-eval` before it ends evaluation_failed.
	WaitLimit time.Duration `mapstructure:"wait_limit" yaml:"wait_limit"`
	// Curve overrides the tasks' curve marks (["off"]: none).
	Curve   []string `mapstructure:"curve" yaml:"curve"`
	DataDir string   `mapstructure:"data_dir" yaml:"data_dir"` // where tasks' evaluation.data lie
}

// CurveOff is eval.curve's value that scores no marks.
const CurveOff = "off"

// CurveMarks are eval.curve's marks; off: no curve; none and not off:
// each task's own.
func (e Eval) CurveMarks() (marks []tasks.MarkTime, off bool, err error) {
	if len(e.Curve) == 1 && e.Curve[0] == CurveOff {
		return nil, true, nil
	}
	for _, s := range e.Curve {
		m, err := tasks.ParseMark(s)
		if err != nil {
			return nil, false, err
		}
		marks = append(marks, m)
	}
	return marks, false, nil
}

// Host describes the machine a worker runs on.
type Host struct {
	ID         string `mapstructure:"id" yaml:"id"`
	GPUDevices []int  `mapstructure:"gpu_devices" yaml:"gpu_devices"`
	GPUType    string `mapstructure:"gpu_type" yaml:"gpu_type"`
	// FenceInterval is how often containers are checked against live
	// attempts (host.runtime docker).
	FenceInterval time.Duration `mapstructure:"fence_interval" yaml:"fence_interval"`
	// StopTimeout is how long a stopping worker (SIGTERM) gives its running
	// agents to be stopped and checkpointed before it exits.
	StopTimeout time.Duration `mapstructure:"stop_timeout" yaml:"stop_timeout"`
	// LeaseTTL is how long a slot stays leased without its holder's
	// heartbeats renewing it.
	LeaseTTL time.Duration `mapstructure:"lease_ttl" yaml:"lease_ttl"`
	// Preemption is what warns this host before it is taken back:
	// "none", or "ec2-spot" (the instance metadata service's notices).
	Preemption Preemption `mapstructure:"preemption" yaml:"preemption"`
	// IMDSEndpoint overrides the instance metadata service's address.
	IMDSEndpoint string `mapstructure:"imds_endpoint" yaml:"imds_endpoint"`
	// Dedicated: the worker serves only its host queue (a provisioned
	// host, started for one attempt).
	Dedicated bool `mapstructure:"dedicated" yaml:"dedicated"`
	// MaxAgents bounds the agents running at once on this host.
	MaxAgents int     `mapstructure:"max_agents" yaml:"max_agents"`
	WorkDir   string  `mapstructure:"work_dir" yaml:"work_dir"`
	Runtime   Runtime `mapstructure:"runtime" yaml:"runtime"`
	// AgentBinary runs the built-in agents and the reference evaluator
	// (host.runtime process); "" finds mlrb-agent beside this binary.
	AgentBinary string `mapstructure:"agent_binary" yaml:"agent_binary"`
}

// Container configures host.runtime docker.
type Container struct {
	AgentImage string   `mapstructure:"agent_image" yaml:"agent_image"`
	EvalImage  string   `mapstructure:"eval_image" yaml:"eval_image"`
	Paths      []string `mapstructure:"paths" yaml:"paths"`
	Workdir    string   `mapstructure:"workdir" yaml:"workdir"`
	Self       string   `mapstructure:"self" yaml:"self"`
	MemoryMB   int64    `mapstructure:"memory_mb" yaml:"memory_mb"`
	CPUs       float64  `mapstructure:"cpus" yaml:"cpus"`
	PidsLimit  int64    `mapstructure:"pids_limit" yaml:"pids_limit"`
	// User runs agents and evaluators as uid[:gid] instead of the
	// image's user (root in most); UserImage: as the image's.
	User string `mapstructure:"user" yaml:"user"`
	// GPUs is how leased GPUs reach a container: GPUsNVIDIA or GPUsDevices.
	GPUs string `mapstructure:"gpus" yaml:"gpus"`
}

// Tasks points at an extra catalog directory merged over the embedded one.
type Tasks struct {
	Dir string `mapstructure:"dir" yaml:"dir"`
}

// UserImage is container.user's word for the image's own user.
const UserImage = "image"

// How leased GPUs reach a container (container.gpus).
const (
	GPUsNVIDIA  = "nvidia"
	GPUsDevices = "devices"
)

// Agents points at the operator's agent definitions, merged over the
// shipped ones.
type Agents struct {
	Dir string `mapstructure:"dir" yaml:"dir"`
}

// Log configures the worker's logger.
type Log struct {
	Level string `mapstructure:"level" yaml:"level"`
}

// Metrics configures the worker's Prometheus endpoint.
type Metrics struct {
	// Listen is the endpoint's host:port ("": no endpoint).
	Listen string `mapstructure:"listen" yaml:"listen"`
	// Fleet adds the run counts the Temporal server keeps (by phase and
	// outcome): the same on every worker, so one worker is enough.
	Fleet bool `mapstructure:"fleet" yaml:"fleet"`
}

// Error is a configuration problem; it names the key and the fix.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func defaultStateDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "mlrb")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "mlrb")
	}
	return ".mlrb"
}

// SlurmWorkDir is where Slurm jobs keep their workspaces and logs.
func (c *Config) SlurmWorkDir() string {
	if c.Provision.Slurm.WorkDir != "" {
		return c.Provision.Slurm.WorkDir
	}
	return c.StateDir("slurm")
}

// StateDir resolves a path under the dev state dir.
func (c *Config) StateDir(parts ...string) string {
	return filepath.Join(append([]string{c.Dev.StateDir}, parts...)...)
}

// BlobRoot is the filesystem blob store's root.
func (c *Config) BlobRoot() string {
	if c.Storage.FSRoot != "" {
		return c.Storage.FSRoot
	}
	return c.StateDir("blobs")
}

// WorkDir is where the worker puts run workspaces.
func (c *Config) WorkDir() string {
	if c.Host.WorkDir != "" {
		return c.Host.WorkDir
	}
	return c.StateDir("work")
}
