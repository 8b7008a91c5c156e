package app

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlrb/mlrb/config"
)

func TestAgentBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "agent")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{}

	// Unset, with nothing beside this binary: this binary.
	sib := filepath.Join(filepath.Dir(self), AgentBinaryName)
	if _, err := os.Stat(sib); err == nil {
		t.Fatalf("%s exists already: the unset case cannot be checked", sib)
	}
	if got, err := AgentBinary(cfg); err != nil || got != self {
		t.Fatalf("unset: %q, %v; want %q", got, err, self)
	}
	// Unset, with mlrb-agent beside it: that one.
	if err := os.WriteFile(sib, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(sib) })
	if got, err := AgentBinary(cfg); err != nil || got != sib {
		t.Fatalf("unset, %s beside: %q, %v", AgentBinaryName, got, err)
	}
	// Set: that one, whatever is beside.
	cfg.Host.AgentBinary = script
	if got, err := AgentBinary(cfg); err != nil || got != script {
		t.Fatalf("set: %q, %v; want %q", got, err, script)
	}
	for _, bad := range []string{filepath.Join(dir, "missing"), plain, dir} {
		cfg.Host.AgentBinary = bad
		_, err := AgentBinary(cfg)
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "host.agent_binary: "+bad+" is not an executable file") {
			t.Errorf("%s: err %v, want a config error naming host.agent_binary", bad, err)
		}
	}
}
