// Package config holds mlrb's one typed Config, loaded by viper from
// defaults < mlrb.yaml < MLRB_* environment < flags, and validated.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"

	"github.com/mlrb/mlrb/internal/contract"
	"github.com/mlrb/mlrb/internal/gateway"
)

// DefaultEgress is where an agent may connect unless agent.egress says
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
	Container  Container  `mapstructure:"container" yaml:"container"`
	Provision  Provision  `mapstructure:"provision" yaml:"provision"`
	Log        Log        `mapstructure:"log" yaml:"log"`
	Metrics    Metrics    `mapstructure:"metrics" yaml:"metrics"`
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
	APIKey         string        `mapstructure:"api_key" yaml:"api_key" secret:"true"`
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
	Grace            time.Duration `mapstructure:"grace" yaml:"grace"`
	MaxInfraAttempts int           `mapstructure:"max_infra_attempts" yaml:"max_infra_attempts"`
	// LeaseTimeout bounds the wait for a free slot before infra_failed.
	LeaseTimeout time.Duration `mapstructure:"lease_timeout" yaml:"lease_timeout"`
	Provider     string        `mapstructure:"provider" yaml:"provider"`
	// EnvFile holds secrets (KEY=value) on the worker; runs name the keys.
	EnvFile string `mapstructure:"env_file" yaml:"env_file"`
	// SecretNames, if set, are the only secret names runs may ask for.
	SecretNames []string `mapstructure:"secret_names" yaml:"secret_names"`
	// Egress is where agent containers may connect (gateway.Policy).
	Egress []string `mapstructure:"egress" yaml:"egress"`
	// WorkspaceLimitGB bounds an attempt's workspace on disk (0: none).
	WorkspaceLimitGB float64 `mapstructure:"workspace_limit_gb" yaml:"workspace_limit_gb"`
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
	// image's user (root in most).
	User string `mapstructure:"user" yaml:"user"`
}

// Tasks points at an extra catalog directory merged over the embedded one.
type Tasks struct {
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

// Keys lists every config key, sorted.
func Keys() []string {
	d := defaults()
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EnvName is the environment variable for a key, the viper way.
func EnvName(key string) string {
	return "MLRB_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Load builds the Config. file may be empty (then MLRB_CONFIG, then
// ./mlrb.yaml if present). flags may be nil; the flags in flagKeys (flag
// name -> key) win over everything. cmdDefaults (key -> value) replace
// built-in defaults for one command and lose to file, env and flags.
func Load(file string, flags *pflag.FlagSet, flagKeys map[string]string, cmdDefaults map[string]string) (*Config, error) {
	v := viper.New()
	for k, val := range defaults() {
		v.SetDefault(k, val)
	}
	for k, val := range cmdDefaults {
		v.SetDefault(k, val)
	}
	v.SetEnvPrefix("MLRB")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	if file == "" {
		file = os.Getenv("MLRB_CONFIG")
	}
	if file == "" {
		if _, err := os.Stat("mlrb.yaml"); err == nil {
			file = "mlrb.yaml"
		}
	}
	if file != "" {
		if err := readFile(v, file); err != nil {
			return nil, err
		}
	}
	if flags != nil {
		for flagName, key := range flagKeys {
			f := flags.Lookup(flagName)
			if f == nil {
				continue
			}
			if err := v.BindPFlag(key, f); err != nil {
				return nil, fmt.Errorf("config: bind flag --%s: %w", flagName, err)
			}
		}
	}
	if err := checkDurations(v); err != nil {
		return nil, err
	}
	var c Config
	dec, err := mapstructure.NewDecoder(&mapstructure.DecoderConfig{
		Result:           &c,
		WeaklyTypedInput: true,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(),
			splitList,
		),
	})
	if err != nil {
		return nil, fmt.Errorf("config: decoder: %w", err)
	}
	if err := dec.Decode(v.AllSettings()); err != nil {
		return nil, &Error{Msg: fmt.Sprintf("config: %v", err)}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// splitList reads a list given as one string (an environment variable:
// "0,1", "[0, 1]", "a,b") into its elements, for a list of any element
// type; the decoder then converts each element.
func splitList(f, t reflect.Type, data any) (any, error) {
	if f.Kind() != reflect.String || t.Kind() != reflect.Slice {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
	if s == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, nil
}

// readFile merges a YAML file and rejects keys mlrb does not know: a typo
// silently ignored would run a 24 h job with the wrong settings.
func readFile(v *viper.Viper, file string) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return &Error{Msg: fmt.Sprintf("config file %s: %v (fix the path given to --config or MLRB_CONFIG)", file, unwrapPath(err))}
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return &Error{Msg: fmt.Sprintf("config file %s is not valid YAML: %v", file, err)}
	}
	known := map[string]bool{}
	for _, k := range Keys() {
		parts := strings.Split(k, ".")
		for i := range parts {
			known[strings.Join(parts[:i+1], ".")] = true
		}
	}
	if err := checkKeys(m, "", known); err != nil {
		return &Error{Msg: fmt.Sprintf("config file %s: %v", file, err)}
	}
	if err := v.MergeConfigMap(m); err != nil {
		return fmt.Errorf("config file %s: %w", file, err)
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func checkKeys(m map[string]any, prefix string, known map[string]bool) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		full := k
		if prefix != "" {
			full = prefix + "." + k
		}
		if !known[full] {
			return fmt.Errorf("unknown config key %q (known keys: see `starter config show`)", full)
		}
		if sub, ok := m[k].(map[string]any); ok {
			if err := checkKeys(sub, full, known); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDurations(v *viper.Viper) error {
	for _, k := range Keys() {
		if !durationKey(k) {
			continue
		}
		s := v.GetString(k)
		d, err := time.ParseDuration(s)
		if err != nil {
			return &Error{Msg: fmt.Sprintf("%s: %q is not a duration (write it like 90s, 10m or 24h; env %s)", k, s, EnvName(k))}
		}
		if d <= 0 {
			return &Error{Msg: fmt.Sprintf("%s: %q must be positive (env %s)", k, s, EnvName(k))}
		}
	}
	return nil
}

// userSpec is a numeric uid[:gid]: names would resolve inside the image,
// and the worker must own the workspace to the same ids.
var userSpec = regexp.MustCompile(`^[0-9]+(:[0-9]+)?$`)

// validListen tells a host:port a server can listen on.
func validListen(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}

// Validate checks the values that decode but make no sense.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }
	switch {
	case c.Temporal.Address == "" || !strings.Contains(c.Temporal.Address, ":"):
		return bad("temporal.address: %q is not host:port (e.g. 127.0.0.1:7233)", c.Temporal.Address)
	case c.Temporal.Namespace == "":
		return bad("temporal.namespace: must not be empty")
	case c.Temporal.TaskQueue == "":
		return bad("temporal.task_queue: must not be empty")
	case c.Dev.Port <= 0 || c.Dev.Port > 65535:
		return bad("dev.port: %d is not a TCP port (1-65535)", c.Dev.Port)
	case c.Dev.UIPort < 0 || c.Dev.UIPort > 65535:
		return bad("dev.ui_port: %d is not a TCP port (0 disables the UI)", c.Dev.UIPort)
	case oneOf("storage.kind", c.Storage.Kind, StorageKinds) != nil:
		return &Error{Msg: oneOf("storage.kind", c.Storage.Kind, StorageKinds).Error()}
	case c.Storage.Kind == StorageS3 && c.Storage.S3.Bucket == "":
		return bad("storage.s3.bucket: must be set when storage.kind is s3 (env MLRB_STORAGE_S3_BUCKET)")
	case c.Storage.Parallel < 1 || c.Storage.Parallel > 256:
		return bad("storage.parallel: %d is out of range (1 to 256)", c.Storage.Parallel)
	case c.Checkpoint.Keep < 1:
		return bad("checkpoint.keep: %d must be at least 1", c.Checkpoint.Keep)
	case c.Checkpoint.AlertAfter < 1:
		return bad("checkpoint.alert_after: %d must be at least 1", c.Checkpoint.AlertAfter)
	case c.Checkpoint.ChunkSize < 64<<10 || c.Checkpoint.ChunkSize > 256<<20:
		return bad("checkpoint.chunk_size: %d is out of range (64 KiB to 256 MiB)", c.Checkpoint.ChunkSize)
	case c.Agent.MaxInfraAttempts < 1:
		return bad("agent.max_infra_attempts: %d must be at least 1", c.Agent.MaxInfraAttempts)
	case c.Eval.Attempts < 1:
		return bad("eval.attempts: %d must be at least 1", c.Eval.Attempts)
	case oneOf("host.runtime", c.Host.Runtime, Runtimes) != nil:
		return &Error{Msg: oneOf("host.runtime", c.Host.Runtime, Runtimes).Error()}
	case c.Host.Runtime == RuntimeDocker && (c.Container.AgentImage == "" || c.Container.EvalImage == ""):
		return bad("container.agent_image and container.eval_image: must be set for host.runtime docker")
	case c.Host.MaxAgents < 1:
		return bad("host.max_agents: %d must be at least 1", c.Host.MaxAgents)
	case c.Host.ID == "":
		return bad("host.id: must not be empty (set MLRB_HOST_ID)")
	case c.Agent.LogLimitMB < 0:
		return bad("agent.log_limit_mb: %d must be 0 (no limit) or more", c.Agent.LogLimitMB)
	case c.Agent.WorkspaceLimitGB < 0:
		return bad("agent.workspace_limit_gb: %g must be 0 (no limit) or more", c.Agent.WorkspaceLimitGB)
	case c.Container.User != "" && !userSpec.MatchString(c.Container.User):
		return bad("container.user: %q is not uid or uid:gid (numbers, e.g. 1000:1000)", c.Container.User)
	case oneOf("provision.kind", c.Provision.Kind, ProvisionKinds) != nil:
		return &Error{Msg: oneOf("provision.kind", c.Provision.Kind, ProvisionKinds).Error()}
	case c.Provision.Kind == ProvisionEC2 && c.Provision.EC2.AMI == "":
		return bad("provision.ec2.ami: must be set for provision.kind ec2 (an image with the worker and its config)")
	case oneOf("host.preemption", c.Host.Preemption, Preemptions) != nil:
		return &Error{Msg: oneOf("host.preemption", c.Host.Preemption, Preemptions).Error()}
	case c.Metrics.Listen != "" && !validListen(c.Metrics.Listen):
		return bad("metrics.listen: %q is not host:port with a port (e.g. 127.0.0.1:9464 or :9464)", c.Metrics.Listen)
	case c.Host.LeaseTTL < c.Agent.HeartbeatTimeout:
		return bad("host.lease_ttl: %s is shorter than agent.heartbeat_timeout (%s); heartbeats renew leases, so make it at least that", c.Host.LeaseTTL, c.Agent.HeartbeatTimeout)
	}
	for _, p := range c.Agent.Egress {
		if err := gateway.CheckPattern(p); err != nil {
			return bad("agent.egress: %v", err)
		}
	}
	for _, n := range c.Agent.SecretNames {
		if err := contract.CheckSecretName(n); err != nil {
			return bad("agent.secret_names: %v", err)
		}
	}
	for _, g := range c.Checkpoint.Exclude {
		if _, err := path.Match(g, ""); err != nil || strings.HasPrefix(g, "/") {
			return bad("checkpoint.exclude: %q is not a relative path glob (like root/.cache/huggingface/token)", g)
		}
	}
	if _, err := c.Provision.InstanceTypes(); err != nil {
		return &Error{Msg: err.Error()}
	}
	seen := map[int]bool{}
	for _, d := range c.Host.GPUDevices {
		if d < 0 || seen[d] {
			return bad("host.gpu_devices: %v must be distinct device ids >= 0", c.Host.GPUDevices)
		}
		seen[d] = true
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level: %q is not one of debug, info, warn, error", c.Log.Level)
	}
	return nil
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

// Redacted returns the config as YAML with secrets replaced.
func (c *Config) Redacted() string {
	cp := *c
	redact(reflect.ValueOf(&cp).Elem())
	out, err := yaml.Marshal(&cp)
	if err != nil {
		return fmt.Sprintf("# cannot render config: %v\n", err)
	}
	return string(out)
}

func redact(v reflect.Value) {
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Struct:
			redact(f)
		case t.Field(i).Tag.Get("secret") == "true" && f.Kind() == reflect.String && f.String() != "":
			f.SetString("<redacted>")
		}
	}
}
