package e2e

import (
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAgentNetworkReachesNothingOfOurs is audit #2 with real containers:
// from inside an agent's container, the Temporal frontend, the worker's
// metrics listener, the blob store's endpoint and a stand-in for the
// instance metadata service are unreachable, directly and through its
// door, while a destination the operator allows (a test host on its own
// Docker network) answers through the door.
//
// Each of ours is put where a container on Docker's default bridge can
// route to it (a forwarder on the bridge's gateway address, as a cluster
// frontend or S3 endpoint on the network would be), and the same probe
// is first run on that default bridge, which is what agents had before:
// it must reach all four, or this test proves nothing.
func TestAgentNetworkReachesNothingOfOurs(t *testing.T) {
	parallel(t)
	e := dockerEnv(t)
	gw := bridgeGateway(t)
	metrics := freePort(t)
	s3 := startFakeService(t, "store")
	imds := startFakeService(t, "metadata")
	ours := map[string]string{
		"temporal": forward(t, gw, "127.0.0.1:"+strconv.Itoa(e.port)),
		"metrics":  forward(t, gw, "127.0.0.1:"+strconv.Itoa(metrics)),
		"store":    forward(t, gw, s3),
		"metadata": forward(t, gw, imds),
	}
	testHost := startTestHost(t)
	targets := []string{"testhost=" + testHost, "imds-ip=169.254.169.254:80", "temporal-loopback=127.0.0.1:" + strconv.Itoa(e.port)}
	for name, addr := range ours {
		targets = append(targets, name+"="+addr)
	}
	testtaskImage(t, "mlrb-netprobe:e2e", append([]string{"netprobe"}, targets...)...)

	// The control: the default bridge reaches every one of ours.
	out, err := exec.Command("docker", "run", "--rm", "--network", "bridge", "mlrb-netprobe:e2e").CombinedOutput()
	if err != nil {
		t.Fatalf("probe on the default bridge: %v\n%s", err, out)
	}
	for name := range ours {
		if !strings.Contains(string(out), "direct "+name+" reached") {
			t.Fatalf("on the default bridge the probe does not reach %s, so it proves nothing:\n%s", name, out)
		}
	}

	envFile := filepath.Join(t.TempDir(), "agent.env")
	if err := os.WriteFile(envFile, []byte("OPENAI_API_KEY=sk-e2e-net\nHUGGINGFACE_TOKEN=hf_e2e_net\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars = append(e.vars, "MLRB_AGENT_ENV_FILE="+envFile, "MLRB_METRICS_LISTEN=0.0.0.0:"+strconv.Itoa(metrics),
		"MLRB_HOST_IMDS_ENDPOINT=http://"+ours["metadata"], "MLRB_GATEWAY_ALLOW="+testHost)
	e.addTask("e2e_net", "mini_baby_lm", nil)
	e.start("worker", "--dev")
	e.waitServer()
	var res result
	e.starterJSON(&res, "run", "--task", "e2e_net", "--label", "e2e-image", "--image", "mlrb-netprobe:e2e", "--provider", "openai",
		"--seed", "1", "--wait", "--json")
	logs, errs, code := e.starter("logs", res.RunID)
	if code != 0 {
		t.Fatalf("starter logs: %s", errs)
	}
	t.Logf("on the default bridge:\n%s\ninside the agent's container:\n%s", out, logs)
	for _, name := range append([]string{"imds-ip", "temporal-loopback"}, keys(ours)...) {
		if !strings.Contains(logs, "direct "+name+" blocked") {
			t.Errorf("the agent reached %s directly:\n%s", name, logs)
		}
		if !strings.Contains(logs, "proxy "+name+" 403") {
			t.Errorf("the agent's door let it through to %s:\n%s", name, logs)
		}
	}
	if !strings.Contains(logs, "proxy testhost 200 hello from the test host") {
		e.dumpLogs()
		t.Fatalf("the allowed test host did not answer through the door:\n%s", logs)
	}
	if !strings.Contains(logs, "direct testhost blocked") {
		t.Errorf("the agent reached the test host without its door:\n%s", logs)
	}
	// No container of the attempt is left, its door included.
	if ids := allContainers(t, "e2e-"+strings.ToLower(t.Name())); len(ids) != 0 {
		t.Errorf("containers left: %v", ids)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// bridgeGateway is the host's address on Docker's default bridge: its
// interface's (the IPAM config may leave the gateway out).
func bridgeGateway(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "-f", `{{index .Options "com.docker.network.bridge.name"}}`).Output()
	if err != nil {
		t.Fatalf("docker network inspect bridge: %v", err)
	}
	ifi, err := net.InterfaceByName(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("the default bridge's interface %q: %v", out, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String()
		}
	}
	t.Fatalf("the default bridge %s has no IPv4 address", ifi.Name)
	return ""
}

// forward listens on host:0 and carries each connection to to; it
// returns the address it listens on.
func forward(t *testing.T, host, to string) string {
	return accept(t, host, func(c net.Conn) {
		up, err := net.Dial("tcp", to)
		if err != nil {
			return
		}
		defer func() { _ = up.Close() }()
		go func() { _, _ = io.Copy(up, c) }()
		_, _ = io.Copy(c, up)
	})
}

// startFakeService listens on loopback and greets whoever connects.
func startFakeService(t *testing.T, name string) string {
	return accept(t, "127.0.0.1", func(c net.Conn) { _, _ = io.WriteString(c, "HTTP/1.0 200 OK\r\n\r\n"+name+"\n") })
}

// accept listens on host:0 until the test ends, handing each connection
// to serve (and closing it after); it returns the address.
func accept(t *testing.T, host string, serve func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				serve(c)
			}()
		}
	}()
	return l.Addr().String()
}

// startTestHost runs a web server in a container on a Docker network of
// its own: a destination beyond the host that an operator may allow.
func startTestHost(t *testing.T) string {
	t.Helper()
	testtaskImage(t, "mlrb-testhost:e2e", "serve", ":8080")
	netName := "mlrb-e2e-testhost"
	_ = exec.Command("docker", "rm", "-f", netName).Run()
	_ = exec.Command("docker", "network", "rm", netName).Run()
	if out, err := exec.Command("docker", "network", "create", netName).CombinedOutput(); err != nil {
		t.Fatalf("docker network create: %v %s", err, out)
	}
	t.Cleanup(func() {
		_ = exec.Command("docker", "rm", "-f", netName).Run()
		_ = exec.Command("docker", "network", "rm", netName).Run()
	})
	if out, err := exec.Command("docker", "run", "-d", "--name", netName, "--network", netName, "mlrb-testhost:e2e").CombinedOutput(); err != nil {
		t.Fatalf("docker run test host: %v %s", err, out)
	}
	out, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", netName).Output()
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSpace(string(out)) + ":8080"
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("the test host %s does not answer", addr)
	return ""
}
