// TLSConfig builds the client side of the frontend connection from temporal.tls and temporal.api_key (nil.

package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
)

// TLSConfig builds the client side of the frontend connection from
// temporal.tls and temporal.api_key (nil: plaintext). Each file is read
// and parsed here, so a wrong path or a mismatched pair is an error
// naming its key before anything dials.
func (t Temporal) TLSConfig() (*tls.Config, error) {
	if !t.UsesTLS() {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.TLS.ServerName}
	if c.ServerName == "" {
		// A private CA's certificate names the frontend's host; an address
		// given as an IP is matched against the certificate's IP SANs.
		if host, _, err := net.SplitHostPort(t.Address); err == nil {
			c.ServerName = host
		}
	}
	if f := t.TLS.CAFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, &Error{Msg: fmt.Sprintf("temporal.tls.ca_file: %v", err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &Error{Msg: fmt.Sprintf("temporal.tls.ca_file: %s holds no PEM certificate", f)}
		}
		c.RootCAs = pool
	}
	switch cert, key := t.TLS.CertFile, t.TLS.KeyFile; {
	case cert == "" && key == "":
	case cert == "" || key == "":
		return nil, &Error{Msg: "temporal.tls.cert_file and temporal.tls.key_file: set both for mutual TLS, or neither"}
	default:
		if err := PrivateFile("temporal.tls.key_file", key); err != nil {
			return nil, err
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, &Error{Msg: fmt.Sprintf("temporal.tls.cert_file, temporal.tls.key_file: %v", err)}
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// Compresses tells whether requests to the frontend are gzipped: auto
// compresses unless the address is a loopback one (localhost or a
// loopback IP).
func (t Temporal) Compresses() bool {
	switch t.Compression {
	case CompressionGzip:
		return true
	case CompressionNone:
		return false
	}
	host, _, err := net.SplitHostPort(t.Address)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
