package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/process/cli"
)

// TestReadmeFlagsExist: every flag the configuration page's table lists exists
// on the starter or the worker as that key's flag (four of them once
// exited 2 as unknown), and no command's own flag takes a key's name.
func TestReadmeFlagsExist(t *testing.T) {
	exposed, err := cli.KeyFlags(newRoot())
	if err != nil {
		t.Fatal(err)
	}
	// The worker's are checked against its own tree in worker/; it adds
	// exactly cli.WorkerKeys.
	var fs pflag.FlagSet
	config.AddFlags(&fs, cli.WorkerKeys...)
	fs.VisitAll(func(f *pflag.Flag) { exposed[f.Name] = true })
	b, err := os.ReadFile(filepath.Join("..", "docs", "operate", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z_.0-9]+)` \\|[^|]*\\|[^|]*\\| `--([a-z-]+)` \\|").FindAllStringSubmatch(string(b), -1)
	if len(rows) < 10 {
		t.Fatalf("found %d flags in the configuration page's table; is it still there?", len(rows))
	}
	for _, r := range rows {
		if !exposed[r[2]] {
			t.Errorf("the configuration page documents --%s (%s), which no command has", r[2], r[1])
		}
	}
	for _, k := range config.Table {
		if k.Flag != "" && !exposed[k.Flag] {
			t.Errorf("config.Table gives %s the flag --%s, which no command has", k.Name, k.Flag)
		}
	}
}

// TestPolicyFlagsReachTheConfig: a policy flag on a command that starts
// runs sets its key, and the demo's own default holds unless a flag says
// otherwise.
func TestPolicyFlagsReachTheConfig(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "mlrb.yaml")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLRB_CONFIG", empty)
	root := newRoot()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo"}, "10m0s"}, // the mini tasks say 3s themselves
		{[]string{"demo", "--interval", "7s"}, "7s"},
		{[]string{"run", "--task", "x", "--interval", "45s", "--hb-timeout", "90s", "--infra-tries", "2"}, "45s"},
	} {
		cmd, rest, err := root.Find(c.args)
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		cfg, err := cli.LoadConfig(cmd)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Checkpoint.Interval.String(); got != c.want {
			t.Errorf("%v: checkpoint.interval %s, want %s", c.args, got, c.want)
		}
		if c.args[0] == "run" && (cfg.Agent.HeartbeatTimeout.String() != "1m30s" || cfg.Agent.MaxInfraAttempts != 2) {
			t.Errorf("%v: heartbeat %s, infra attempts %d", c.args, cfg.Agent.HeartbeatTimeout, cfg.Agent.MaxInfraAttempts)
		}
	}
}
