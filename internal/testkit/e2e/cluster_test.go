package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// TestProductionCluster sets mlrb up from nothing on the production
// deployment of deploy/cluster: PostgreSQL with Temporal's schema made by
// Temporal's own SQL tool, the four services as separate processes of
// the server mlrb pins, every connection under mutual TLS. A worker
// refuses the bare namespace, `starter setup` readies it, a starter
// without its certificate is refused with a TLS error, and a mini
// benchmark scores every run across `kill -9` of the history service and
// an immediate PostgreSQL restart.
func TestProductionCluster(t *testing.T) {
	parallel(t)
	c := startCluster(t)
	e := newEnv(t, c.clientVars()...)
	e.timeout = 8 * time.Minute

	p := e.start("worker")
	if code := waitExit(t, p, time.Minute); code != 2 {
		t.Fatalf("a worker on a cluster without the namespace: exit %d, want 2", code)
	}
	if log := readLog(t, e, "worker"); !strings.Contains(log, "namespace mlrb does not exist") || !strings.Contains(log, "starter setup --create-namespace") {
		t.Fatalf("the worker does not name the missing namespace and its fix:\n%s", log)
	}
	if _, errs, code := e.starter("setup"); code != 2 || !strings.Contains(errs, "--create-namespace") {
		t.Fatalf("setup without --create-namespace on a bare cluster: exit %d: %s", code, errs)
	}
	out, errs, code := e.starter("setup", "--create-namespace", "--retention", "720h")
	if code != 0 || !strings.Contains(out, "created, retention 720h") || !strings.Contains(out, "registered: MlrbAgent, MlrbBenchmark, MlrbOutcome, MlrbPhase, MlrbTask") {
		t.Fatalf("setup (exit %d): %s %s", code, out, errs)
	}
	if out, _, code := e.starter("setup"); code != 0 || !strings.Contains(out, "all present") {
		t.Fatalf("setup again (exit %d): %s", code, out)
	}
	noCert := append(append([]string{}, e.vars...), "MLRB_TEMPORAL_TLS_CERT_FILE=", "MLRB_TEMPORAL_TLS_KEY_FILE=")
	bare := &env{t: t, state: e.state, vars: noCert}
	if _, errs, code := bare.starter("list"); code != 2 || !strings.Contains(errs, "TLS with Temporal") || !strings.Contains(errs, "temporal.tls.cert_file") {
		t.Fatalf("a starter without its certificate (exit %d): %s", code, errs)
	}

	e.worker = e.start("worker")
	bench := "bench-cluster"
	done := make(chan string, 1)
	go func() {
		out, errs, code := e.starter("benchmark", "--suite", "mini", "--agents", "reference", "--seeds", "1", "--id", bench,
			"--concurrency", "4", "--wait", "--format", "csv")
		done <- fmt.Sprintf("exit %d\n%s\n%s", code, out, errs)
	}()
	first := bench + "/reference/mini_baby_lm/s1"
	waitFor(t, 2*time.Minute, "the first run to start", func() bool {
		_, _, code := e.starter("status", first)
		return code == 0
	})
	c.kill(t, "history")
	_, errs, code = e.starter("status", first)
	if code == 0 || !strings.Contains(errs, "the runs are safe") {
		t.Fatalf("status while history is down (exit %d): %s", code, errs)
	}
	t.Logf("status while history is down: %s", errs)
	c.startService(t, "history")
	c.restartPostgres(t)
	res := <-done
	t.Logf("benchmark across the drills:\n%s", res)
	if !strings.HasPrefix(res, "exit 0") {
		t.Fatalf("benchmark across the drills: %s", res)
	}
	for _, task := range []string{"mini_baby_lm", "mini_edge_llm_compression", "mini_edge_llm_training", "mini_llm_efficiency", "mini_llm_merging", "mini_math_reasoning", "mini_mini_pile"} {
		if !strings.Contains(res, "\n"+task+",reference,1,1,0,0,0,") {
			t.Fatalf("%s not scored (1 run, 1 scored, nothing lost) across the drills:\n%s", task, res)
		}
	}
	c.logMemory(t)
}

// cluster is PostgreSQL and Temporal's four services, as deploy/cluster lays them out.
type cluster struct {
	dir, pgData, pgCtl string
	pgPort             int
	env                []string
	procs              map[string]*service
	tls                string // the CA, the node's and mlrb's certificates
}

// startCluster builds the server and its SQL tool from mlrb's module (the
// version mlrb pins), starts PostgreSQL, makes the schema with
// deploy/cluster/setup-postgres.sh and starts the services, history first.
func startCluster(t *testing.T) *cluster {
	initdb, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(initdb) == 0 {
		testenv.Missing(t, "PostgreSQL is not installed (apt-get install postgresql)")
	}
	dir, err := os.MkdirTemp("", "mlrb-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &cluster{dir: dir, pgCtl: filepath.Join(filepath.Dir(initdb[0]), "pg_ctl"), procs: map[string]*service{}, tls: filepath.Join(dir, "tls")}
	for _, b := range []string{"temporal-server:go.temporal.io/server/cmd/server", "temporal-sql-tool:go.temporal.io/server/cmd/tools/sql"} {
		name, pkg, _ := strings.Cut(b, ":")
		if _, err := os.Stat(filepath.Join(bin, name)); err == nil {
			continue
		}
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", name, err, out)
		}
	}
	writeCerts(t, c.tls)
	c.startPostgres(t, initdb[0])
	setup := exec.Command("bash", filepath.Join(repoRoot(t), "deploy", "cluster", "setup-postgres.sh"), filepath.Join(bin, "temporal-sql-tool"))
	setup.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(c.pgPort), "PGUSER=temporal", "PGPASSWORD=temporal")
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup-postgres.sh: %v\n%s", err, out)
	}
	port := func() string { return strconv.Itoa(freePort(t)) }
	fe, feHTTP := port(), port()
	c.env = []string{"TEMPORAL_DYNAMIC_CONFIG_FILE=" + filepath.Join(repoRoot(t), "deploy", "cluster", "dynamicconfig.yaml"), "TEMPORAL_TLS_DIR=" + c.tls, "TEMPORAL_TLS_SERVER_NAME=temporal",
		"TEMPORAL_PG_ADDR=127.0.0.1:" + strconv.Itoa(c.pgPort), "TEMPORAL_PG_USER=temporal", "TEMPORAL_PG_PASSWORD=temporal",
		"TEMPORAL_BIND_IP=127.0.0.1", "TEMPORAL_BROADCAST_IP=127.0.0.1", "TEMPORAL_FRONTEND_ADDR=127.0.0.1:" + fe, "TEMPORAL_FRONTEND_HTTP_ADDR=127.0.0.1:" + feHTTP,
		"TEMPORAL_FRONTEND_PORT=" + fe, "TEMPORAL_FRONTEND_HTTP_PORT=" + feHTTP}
	for _, svc := range []string{"FRONTEND", "HISTORY", "MATCHING", "WORKER"} {
		c.env = append(c.env, "TEMPORAL_"+svc+"_MEMBERSHIP_PORT="+port())
		if svc != "FRONTEND" {
			c.env = append(c.env, "TEMPORAL_"+svc+"_PORT="+port())
		}
	}
	// The services race to write the cluster metadata when started at
	// once; history first, each up before the next.
	for _, svc := range []string{"history", "matching", "frontend", "worker"} {
		c.startService(t, svc)
	}
	return c
}

// clientVars point mlrb at the cluster's frontend with mlrb's certificate.
func (c *cluster) clientVars() []string {
	fe := ""
	for _, v := range c.env {
		if a, ok := strings.CutPrefix(v, "TEMPORAL_FRONTEND_ADDR="); ok {
			fe = a
		}
	}
	return []string{"MLRB_TEMPORAL_ADDRESS=" + fe, "MLRB_TEMPORAL_NAMESPACE=mlrb", "MLRB_TEMPORAL_TLS_CA_FILE=" + filepath.Join(c.tls, "ca.pem"),
		"MLRB_TEMPORAL_TLS_CERT_FILE=" + filepath.Join(c.tls, "mlrb.pem"), "MLRB_TEMPORAL_TLS_KEY_FILE=" + filepath.Join(c.tls, "mlrb.key"),
		"MLRB_TEMPORAL_TLS_SERVER_NAME=temporal", "MLRB_CHECKPOINT_INTERVAL=3s"}
}

func (c *cluster) port(svc string) string {
	for _, v := range c.env {
		if p, ok := strings.CutPrefix(v, "TEMPORAL_"+strings.ToUpper(svc)+"_PORT="); ok {
			return p
		}
	}
	return ""
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// startPostgres makes a database cluster of its own on a held port, run
// by the postgres user when the test runs as root (PostgreSQL refuses
// root), with the role Temporal uses.
func (c *cluster) startPostgres(t *testing.T, initdb string) {
	c.pgData = filepath.Join(c.dir, "pg")
	c.pgPort = freePort(t)
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(c.pgData, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("the postgres user (Debian's postgresql package makes it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(c.pgData, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	c.pg(t, initdb, "-D", c.pgData, "-A", "trust", "-U", "postgres")
	c.pg(t, c.pgCtl, "-D", c.pgData, "-l", filepath.Join(c.pgData, "log"), "-w", "-o",
		fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s", c.pgPort, c.pgData), "start")
	t.Cleanup(func() {
		_ = exec.Command("bash", "-c", c.asPostgres(c.pgCtl, "-D", c.pgData, "-m", "immediate", "stop")).Run()
	})
	psql := filepath.Join(filepath.Dir(initdb), "psql")
	c.pg(t, psql, "-h", "127.0.0.1", "-p", strconv.Itoa(c.pgPort), "-U", "postgres", "-c", "CREATE ROLE temporal LOGIN CREATEDB PASSWORD 'temporal'")
}

// restartPostgres stops the database at once, as a crash would, and starts it again.
func (c *cluster) restartPostgres(t *testing.T) {
	c.pg(t, c.pgCtl, "-D", c.pgData, "-m", "immediate", "-w", "restart")
}

func (c *cluster) asPostgres(args ...string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	if os.Geteuid() == 0 {
		return "runuser -u postgres -- " + strings.Join(q, " ")
	}
	return strings.Join(q, " ")
}

// pg runs a PostgreSQL command. Its output goes to a file, not a pipe:
// the server pg_ctl starts would hold a pipe open for its whole life.
func (c *cluster) pg(t *testing.T, args ...string) {
	t.Helper()
	out, err := os.CreateTemp(c.dir, "pg-*.out")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command("bash", "-c", c.asPostgres(args...))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("%s: %v\n%s", filepath.Base(args[0]), err, b)
	}
}

// logMemory logs each service's peak resident memory, for the README's figures.
func (c *cluster) logMemory(t *testing.T) {
	for svc, s := range c.procs {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid()))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "VmHWM:") {
				t.Logf("%s peak RSS: %s", svc, strings.TrimSpace(strings.TrimPrefix(l, "VmHWM:")))
			}
		}
	}
}

// writeCerts makes a CA, the cluster's node certificate (for the name
// "temporal" and 127.0.0.1, as server and as client between services)
// and mlrb's client certificate.
func writeCerts(t *testing.T, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mlrb test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caDER)
	for i, name := range []string{"node", "mlrb"} {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(24 * time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
		if name == "node" {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"temporal"}, []net.IP{net.ParseIP("127.0.0.1")}
			tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		writePEM(t, filepath.Join(dir, name+".pem"), "CERTIFICATE", der)
		writePEM(t, filepath.Join(dir, name+".key"), "EC PRIVATE KEY", kb)
	}
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	mode := os.FileMode(0o644)
	if strings.HasSuffix(kind, "PRIVATE KEY") {
		mode = 0o600 // mlrb refuses a key others may read
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}

// waitExit waits for a process to exit on its own and returns its code.
func waitExit(t *testing.T, p *proc, within time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(within):
		t.Fatalf("%s still running after %s", p.cmd.Path, within)
		return -1
	}
}

func readLog(t *testing.T, e *env, name string) string {
	b, err := os.ReadFile(filepath.Join(e.state, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", within, what)
		}
		time.Sleep(pollEvery)
	}
}

func repoRoot(t *testing.T) string {
	r, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}
