// Validate: every key's value checked, naming the field and the fix.

package config

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

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

// Validate checks the values that decode but make no sense: the files
// that must be private first, then each part's rules in turn, the first
// broken one named with its fix.
func (c *Config) Validate() error {
	if _, err := c.Temporal.TLSConfig(); err != nil {
		return err
	}
	if err := PrivateFile("agent.env_file", c.Agent.EnvFile); err != nil {
		return err
	}
	if err := PrivateFile("bundle.signing_key", c.Bundle.SigningKey); err != nil {
		return err
	}
	for _, rules := range []func(*Config) error{validateFrontend, validateStore, validateRuns, validateHost, validateGateway, validateLists} {
		if err := rules(c); err != nil {
			return err
		}
	}
	return nil
}

// bad is a broken rule's error.
func bad(format string, a ...any) error { return &Error{Msg: fmt.Sprintf(format, a...)} }

// validateFrontend checks the Temporal frontend and the dev server.
func validateFrontend(c *Config) error {
	switch {
	case c.Temporal.Address == "" || !strings.Contains(c.Temporal.Address, ":"):
		return bad("temporal.address: %q is not host:port (e.g. 127.0.0.1:7233)", c.Temporal.Address)
	case c.Temporal.Namespace == "":
		return bad("temporal.namespace: must not be empty")
	case c.Temporal.TaskQueue == "":
		return bad("temporal.task_queue: must not be empty")
	case oneOf("temporal.compression", c.Temporal.Compression, Compressions) != nil:
		return &Error{Msg: oneOf("temporal.compression", c.Temporal.Compression, Compressions).Error()}
	case c.Dev.Port <= 0 || c.Dev.Port > 65535:
		return bad("dev.port: %d is not a TCP port (1-65535)", c.Dev.Port)
	case c.Dev.UIPort < 0 || c.Dev.UIPort > 65535:
		return bad("dev.ui_port: %d is not a TCP port (0 disables the UI)", c.Dev.UIPort)
	}
	return nil
}

// validateStore checks the store and checkpoints.
func validateStore(c *Config) error {
	switch {
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
	}
	return nil
}

// validateRuns checks agents, people and evaluations.
func validateRuns(c *Config) error {
	switch {
	case c.Agent.MaxInfraAttempts < 1:
		return bad("agent.max_infra_attempts: %d must be at least 1", c.Agent.MaxInfraAttempts)
	case c.Human.ReleaseAfter < time.Second:
		return bad("human.release_after: %s must be 1s or more (e.g. 30m)", c.Human.ReleaseAfter)
	case c.Human.WaitLimit < time.Minute:
		return bad("human.wait_limit: %s must be 1m or more (e.g. 336h)", c.Human.WaitLimit)
	case c.Eval.Attempts < 1:
		return bad("eval.attempts: %d must be at least 1", c.Eval.Attempts)
	case c.Agent.LogLimitMB < 0:
		return bad("agent.log_limit_mb: %d must be 0 (no limit) or more", c.Agent.LogLimitMB)
	case c.Agent.WorkspaceMaxEntries < 0:
		return bad("agent.workspace_max_entries: %d must be 0 (no limit) or more", c.Agent.WorkspaceMaxEntries)
	case c.Agent.WorkspaceLimitGB < 0:
		return bad("agent.workspace_limit_gb: %g must be 0 (no limit) or more", c.Agent.WorkspaceLimitGB)
	}
	return nil
}

// validateHost checks the host: its runtime, containers, provisioning and metrics.
func validateHost(c *Config) error {
	switch {
	case oneOf("host.runtime", c.Host.Runtime, Runtimes) != nil:
		return &Error{Msg: oneOf("host.runtime", c.Host.Runtime, Runtimes).Error()}
	case c.Host.Runtime == RuntimeDocker && (c.Container.AgentImage == "" || c.Container.EvalImage == ""):
		return bad("container.agent_image and container.eval_image: must be set for host.runtime docker")
	case c.Provision.Slurm.CommandTimeout <= 0:
		return bad("provision.slurm.command_timeout: %s must be positive (e.g. 30s)", c.Provision.Slurm.CommandTimeout)
	case c.Host.MaxAgents < 1:
		return bad("host.max_agents: %d must be at least 1", c.Host.MaxAgents)
	case c.Host.ID == "":
		return bad("host.id: must not be empty (set MLRB_HOST_ID)")
	case c.Container.GPUs != GPUsNVIDIA && c.Container.GPUs != GPUsDevices:
		return bad("container.gpus: %q is not %s or %s", c.Container.GPUs, GPUsNVIDIA, GPUsDevices)
	case c.Container.User != UserImage && !userSpec.MatchString(c.Container.User):
		return bad("container.user: %q is not uid or uid:gid (numbers, e.g. 65532:65532), or %s (the image's own user)", c.Container.User, UserImage)
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
	return nil
}

// validateGateway checks the gateway's bounds.
func validateGateway(c *Config) error {
	switch {
	case c.Gateway.MaxRefused < 1:
		return bad("gateway.max_refused: %d must be at least 1 (e.g. 100000)", c.Gateway.MaxRefused)
	case c.Gateway.MaxRefusedMB < 1:
		return bad("gateway.max_refused_mb: %d must be at least 1 (e.g. 4096)", c.Gateway.MaxRefusedMB)
	case c.Gateway.MaxRecords < 1000:
		return bad("gateway.max_records: %d is under 1000; a day's run makes thousands of calls and connections (e.g. 1000000)", c.Gateway.MaxRecords)
	case c.Gateway.MaxConnections < 1 || c.Gateway.MaxConnections > 65536:
		return bad("gateway.max_connections: %d is out of range (1 to 65536)", c.Gateway.MaxConnections)
	case c.Gateway.UsageEvery < time.Second:
		return bad("gateway.usage_every: %s is under 1s; each report is an event in the run's history (e.g. 1m)", c.Gateway.UsageEvery)
	}
	return nil
}

// validateLists checks the keys that hold lists and URLs.
func validateLists(c *Config) error {
	for _, u := range []struct{ key, url string }{{"gateway.openai_url", c.Gateway.OpenAIURL}, {"gateway.anthropic_url", c.Gateway.AnthropicURL}} {
		if p, err := url.Parse(u.url); err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
			return bad("%s: %q is not an http(s) URL (e.g. https://api.openai.com/v1)", u.key, u.url)
		}
	}
	if _, _, err := c.Eval.CurveMarks(); err != nil {
		return bad("eval.curve: %v (or [off] for no curve)", err)
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
