package app

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/mlrb/mlrb/config"
	"github.com/mlrb/mlrb/internal/kit/ports"
)

// tlsServer listens with a certificate from its own CA, asking for a
// client certificate when mutual; it returns the address and the CA's PEM.
func tlsServer(t *testing.T, mutual bool) (string, string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "temporal"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, DNSNames: []string{"temporal"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	conf := &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, NextProtos: []string{"h2"}}
	if mutual {
		conf.ClientAuth = tls.RequireAnyClientCert
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", conf)
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
			go func() { _ = c.(*tls.Conn).Handshake(); _ = c.Close() }()
		}
	}()
	return l.Addr().String(), ca
}

// TestConnectErrorsNameTheTLSFix: each way TLS goes wrong is named as a
// TLS failure with the key that fixes it, never "start `worker --dev`".
func TestConnectErrorsNameTheTLSFix(t *testing.T) {
	addr, ca := tlsServer(t, false)
	mAddr, mCA := tlsServer(t, true)
	cases := []struct {
		name string
		tc   config.Temporal
		want string
	}{
		{"plaintext to TLS", config.Temporal{Address: addr}, "temporal.tls.ca_file"},
		{"unknown CA", config.Temporal{Address: addr, TLS: config.TemporalTLS{Enabled: true, ServerName: "temporal"}}, "signed by a CA this host does not trust"},
		{"wrong name", config.Temporal{Address: addr, TLS: config.TemporalTLS{CAFile: ca}}, "temporal.tls.server_name"},
		{"no client certificate", config.Temporal{Address: mAddr, TLS: config.TemporalTLS{CAFile: mCA, ServerName: "temporal"}}, "temporal.tls.cert_file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.tc.Namespace, c.tc.ConnectTimeout = "default", 3*time.Second
			_, err := Dial(context.Background(), &config.Config{Temporal: c.tc}, zap.NewNop())
			var ce *ConnectError
			if !errors.As(err, &ce) || ce.Kind != TLSFailed || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "worker --dev") {
				t.Fatalf("%v; want a TLS failure naming %q", err, c.want)
			}
		})
	}
	// A held port nothing listens on, which no other mlrb process takes.
	held, err := ports.Reserve("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	down := net.JoinHostPort("127.0.0.1", strconv.Itoa(held.Number))
	_, err = Dial(context.Background(), &config.Config{Temporal: config.Temporal{Address: down, Namespace: "default", ConnectTimeout: 2 * time.Second}}, zap.NewNop())
	var ce *ConnectError
	if !errors.As(err, &ce) || ce.Kind != Unreachable || !strings.Contains(err.Error(), "worker --dev") {
		t.Fatalf("nothing listening: %v", err)
	}
}

// TestTLSFilesCheckedOnLoad: a half pair or an unreadable CA is refused
// naming its key, before anything dials.
func TestTLSFilesCheckedOnLoad(t *testing.T) {
	for _, c := range []struct {
		tls  config.TemporalTLS
		want string
	}{
		{config.TemporalTLS{CertFile: "client.pem"}, "temporal.tls.cert_file and temporal.tls.key_file: set both"},
		{config.TemporalTLS{CAFile: filepath.Join(t.TempDir(), "absent.pem")}, "temporal.tls.ca_file: "},
	} {
		_, err := config.Temporal{Address: "x:1", TLS: c.tls}.TLSConfig()
		var ce *config.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%+v: %v; want a config error naming %q", c.tls, err, c.want)
		}
	}
}

// TestOutageOnlyForTemporalCalls: a Temporal call the cluster could not
// serve is named an outage; a store's own timeout is left as it is.
func TestOutageOnlyForTemporalCalls(t *testing.T) {
	for _, err := range []error{serviceerror.NewDeadlineExceeded("deadline"), fmt.Errorf("query run: %w", serviceerror.NewUnavailable("history down"))} {
		if !errors.As(ExplainOutage(err), new(*OutageError)) || !strings.Contains(ExplainOutage(err).Error(), "the runs are safe") {
			t.Fatalf("%v is not named an outage: %v", err, ExplainOutage(err))
		}
	}
	plain := fmt.Errorf("read result from the store: %w", context.DeadlineExceeded)
	if ExplainOutage(plain) != plain {
		t.Fatalf("a store timeout was made a Temporal outage: %v", ExplainOutage(plain))
	}
}
