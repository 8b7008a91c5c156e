// A real S3 server (versitygw) for tests.

// Package s3test runs a real S3 API server (versitygw) on 127.0.0.1 for
// tests. Without the binary a test skips, unless CI is set: then it fails.
package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/mlrb/mlrb/internal/kit/ports"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/testkit/testenv"
)

// Fixed test credentials of the throwaway server.
const (
	AccessKey = "mlrbtest"
	SecretKey = "mlrbtestsecret"
)

// T is what the server needs of its user: a *testing.T, or a command's
// stand-in (the checkpoint benchmark).
type T interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skip(args ...any)
	TempDir() string
	Cleanup(func())
}

// Server is a running versitygw.
type Server struct {
	t        T
	bin      string
	Endpoint string
	Bucket   string
	DataDir  string
	port     int
	iam      string
	cmd      *exec.Cmd
}

// Start runs a server with one bucket; it is stopped when the test ends.
func Start(t T) *Server {
	t.Helper()
	bin := testenv.Tool(t, "versitygw", "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
	// Held for the whole test: the outage tests restart the server on it.
	held, err := ports.Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Release)
	port := held.Number
	dir := t.TempDir()
	s := &Server{t: t, bin: bin, port: port, DataDir: filepath.Join(dir, "data"), iam: filepath.Join(dir, "iam"),
		Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), Bucket: "mlrb-test"}
	for _, d := range []string{s.DataDir, s.iam} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart()
	t.Cleanup(s.Stop)
	c := s.Client()
	if _, err := c.CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatalf("create bucket: %v", err)
	}
	return s
}

// Restart starts the server (again) on the same port and data.
func (s *Server) Restart() {
	s.t.Helper()
	// Keep-alive as any production S3 keeps connections (versitygw's
	// default closes each after one request, and a dial per 4 MiB chunk
	// costs the client a sixth of a checkpoint's CPU).
	cmd := exec.Command(s.bin, "--port", "127.0.0.1:"+strconv.Itoa(s.port), "--keep-alive", "--iam-dir", s.iam, "posix", s.DataDir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+AccessKey, "ROOT_SECRET_KEY="+SecretKey)
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start versitygw: %v", err)
	}
	s.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(s.port)); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatal("versitygw did not listen")
}

// Stop kills the server (as a crash would).
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_, _ = s.cmd.Process.Wait()
		s.cmd = nil
	}
}

// Options returns store options for this server.
func (s *Server) Options(prefix string) blob.S3Options {
	return blob.S3Options{Bucket: s.Bucket, Prefix: prefix, Endpoint: s.Endpoint, PathStyle: true, AccessKeyID: AccessKey, SecretAccessKey: SecretKey, MaxAttempts: 3}
}

// Store opens a blob store on this server.
func (s *Server) Store(prefix string) *blob.S3 {
	s.t.Helper()
	st, err := blob.NewS3(context.Background(), s.Options(prefix))
	if err != nil {
		s.t.Fatal(err)
	}
	return st
}

// Client is a raw S3 client for assertions.
func (s *Server) Client() *s3.Client {
	cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion("us-east-1"),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")))
	if err != nil {
		s.t.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(s.Endpoint)
		o.UsePathStyle = true
	})
}

// RcloneEnv is the environment for rclone to reach this server as ":s3:".
func (s *Server) RcloneEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) > 14 && kv[:14] == "AWS_CA_BUNDLE=" {
			continue // rclone rejects a CA bundle with its own transport
		}
		env = append(env, kv)
	}
	return append(env, "RCLONE_S3_PROVIDER=Other", "RCLONE_S3_ENDPOINT="+s.Endpoint, "RCLONE_S3_ACCESS_KEY_ID="+AccessKey,
		"RCLONE_S3_SECRET_ACCESS_KEY="+SecretKey, "RCLONE_S3_FORCE_PATH_STYLE=true", fmt.Sprintf("RCLONE_CONFIG=%s", os.DevNull))
}
