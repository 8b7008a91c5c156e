package config

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mlrb.yaml")
	if err := os.WriteFile(file, []byte("checkpoint:\n  interval: 5m\nagent:\n  heartbeat_timeout: 30s\n  grace: 20s\ntemporal:\n  api_key: s3cret\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLRB_AGENT_HEARTBEAT_TIMEOUT", "45s")
	t.Setenv("MLRB_AGENT_GRACE", "25s")
	flags := pflag.NewFlagSet("x", pflag.ContinueOnError)
	flags.String("grace", "", "")
	if err := flags.Parse([]string{"--grace", "7s"}); err != nil {
		t.Fatal(err)
	}
	c, err := Load(file, flags, map[string]string{"grace": "agent.grace"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Checkpoint.Interval != 5*time.Minute { // file over default
		t.Errorf("interval = %s", c.Checkpoint.Interval)
	}
	if c.Agent.HeartbeatTimeout != 45*time.Second { // env over file
		t.Errorf("heartbeat timeout = %s", c.Agent.HeartbeatTimeout)
	}
	if c.Agent.Grace != 7*time.Second { // flag over env
		t.Errorf("grace = %s", c.Agent.Grace)
	}
	if c.Temporal.Address != "127.0.0.1:7233" || c.Eval.Attempts != 3 { // defaults
		t.Errorf("defaults lost: %+v", c)
	}
	red := c.Redacted()
	if strings.Contains(red, "s3cret") || !strings.Contains(red, "api_key: <redacted>") {
		t.Errorf("secret not redacted:\n%s", red)
	}
	if c.Temporal.APIKey != "s3cret" {
		t.Error("redaction must not touch the config itself")
	}
}

// TestEnvNames: a key's environment variable is named the viper way and
// really sets it, nested keys and lists included.
func TestEnvNames(t *testing.T) {
	if EnvName("checkpoint.interval") != "MLRB_CHECKPOINT_INTERVAL" || EnvName("temporal.address") != "MLRB_TEMPORAL_ADDRESS" {
		t.Fatal(EnvName("checkpoint.interval"))
	}
	cases := []struct {
		key, value string
		got        func(c *Config) string
	}{
		{"temporal.address", "10.0.0.1:7233", func(c *Config) string { return c.Temporal.Address }},
		{"checkpoint.interval", "1m30s", func(c *Config) string { return c.Checkpoint.Interval.String() }},
		{"storage.s3.bucket", "runs", func(c *Config) string { return c.Storage.S3.Bucket }},
		{"host.max_agents", "7", func(c *Config) string { return strconv.Itoa(c.Host.MaxAgents) }},
		{"container.paths", "/app,/data", func(c *Config) string { return strings.Join(c.Container.Paths, ",") }},
		{"eval.wait_limit", "1h0m0s", func(c *Config) string { return c.Eval.WaitLimit.String() }},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			t.Setenv(EnvName(tc.key), tc.value)
			c, err := Load("", nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.got(c); got != tc.value {
				t.Fatalf("%s=%s gave %s = %q", EnvName(tc.key), tc.value, tc.key, got)
			}
		})
	}
}

// TestCommandDefaults: a command's default replaces the built-in one but
// loses to the environment.
func TestCommandDefaults(t *testing.T) {
	c, err := Load("", nil, nil, map[string]string{"checkpoint.interval": "3s"})
	if err != nil || c.Checkpoint.Interval != 3*time.Second {
		t.Fatalf("interval = %v, %v", c.Checkpoint.Interval, err)
	}
	t.Setenv("MLRB_CHECKPOINT_INTERVAL", "7s")
	if c, _ := Load("", nil, nil, map[string]string{"checkpoint.interval": "3s"}); c.Checkpoint.Interval != 7*time.Second {
		t.Fatalf("env must win over a command default, got %v", c.Checkpoint.Interval)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	cases := map[string]struct{ env, val, want string }{
		"duration": {"MLRB_CHECKPOINT_INTERVAL", "abc", `checkpoint.interval: "abc" is not a duration`},
		"negative": {"MLRB_AGENT_GRACE", "-5s", `agent.grace: "-5s" must be positive`},
		"port":     {"MLRB_DEV_PORT", "70000", "dev.port: 70000 is not a TCP port"},
		"zero":     {"MLRB_GATEWAY_BODY_TIMEOUT", "0s", `gateway.body_timeout: "0s" must be positive`},
		"reports":  {"MLRB_GATEWAY_USAGE_EVERY", "10ms", "gateway.usage_every: 10ms is under 1s"},
		"storage":  {"MLRB_STORAGE_KIND", "ftp", `storage.kind: "ftp" is not supported`},
		"level":    {"MLRB_LOG_LEVEL", "loud", `log.level: "loud"`},
		"compress": {"MLRB_TEMPORAL_COMPRESSION", "zstd", `temporal.compression: "zstd" is not supported (use auto, gzip, none)`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Setenv(tc.env, tc.val)
			_, err := Load("", nil, nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestCompressionToTheFrontend: auto gzips requests over a network, not
// to a loopback address (the embedded server); gzip and none say so.
func TestCompressionToTheFrontend(t *testing.T) {
	for _, c := range []struct {
		mode Compression
		addr string
		want bool
	}{
		{CompressionAuto, "127.0.0.1:7233", false},
		{CompressionAuto, "localhost:7233", false},
		{CompressionAuto, "[::1]:7233", false},
		{CompressionAuto, "10.0.0.5:7233", true},
		{CompressionAuto, "temporal.example.com:7233", true},
		{CompressionAuto, "ns.a1b2c.tmprl.cloud:7233", true},
		{CompressionGzip, "127.0.0.1:7233", true},
		{CompressionNone, "temporal.example.com:7233", false},
	} {
		if got := (Temporal{Address: c.addr, Compression: c.mode}).Compresses(); got != c.want {
			t.Errorf("%s to %s: compresses %v, want %v", c.mode, c.addr, got, c.want)
		}
	}
}

// TestListsFromEnv: a list key set by one environment variable, as a
// Slurm job sets the GPUs it was given ("0,1").
func TestListsFromEnv(t *testing.T) {
	for v, want := range map[string][]int{"0": {0}, "0,1": {0, 1}, "[2, 3]": {2, 3}, "": {}} {
		t.Setenv("MLRB_HOST_GPU_DEVICES", v)
		c, err := Load("", nil, nil, nil)
		if err != nil || !slices.Equal(c.Host.GPUDevices, want) {
			t.Fatalf("%q: %v, %v", v, c.Host.GPUDevices, err)
		}
	}
}

// L7: a key or env file its group or others may read is refused at
// start, naming the setting and the chmod that fixes it; 0600 passes.
func TestPrivateFilesRefusedWhenShared(t *testing.T) {
	dir := t.TempDir()
	env := filepath.Join(dir, "agent.env")
	if err := os.WriteFile(env, []byte("OPENAI_API_KEY=sk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load("", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Agent.EnvFile = env
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "agent.env_file") || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a 0644 env file: %v", err)
	}
	if err := os.Chmod(env, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("a 0600 env file: %v", err)
	}
}
