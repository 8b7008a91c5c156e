// Signing keys: made, loaded, and the verifier.

package bundle

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// A key pair is two PEM files: PREFIX, the ed25519 private key (PKCS #8,
// mode 0600), and PREFIX.pub, its public key (PKIX), which is what a
// third party is given to trust.

// NewKeys writes a new key pair at prefix and prefix.pub, never over an
// existing file, and returns the key's id (SHA-256 of the public key).
func NewKeys(prefix string) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", fmt.Errorf("generate ed25519 key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", fmt.Errorf("encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("encode public key: %w", err)
	}
	if err := writeNew(prefix+".pub", pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", err
	}
	if err := writeNew(prefix, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		_ = os.Remove(prefix + ".pub")
		return "", err
	}
	return dsse.SHA256KeyID(pub)
}

func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write key: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write key %s: %w", path, err)
	}
	return f.Close()
}

// maxKeyFile bounds a key file read: a PEM ed25519 key is about 120 bytes.
const maxKeyFile = 16 << 10

func readPEM(path, want string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, maxKeyFile)
	n, err := f.Read(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	block, _ := pem.Decode(b[:n])
	if block == nil || block.Type != want {
		return nil, fmt.Errorf("%s is not a PEM %s (write one with `starter keys new -o PREFIX`)", path, want)
	}
	return block.Bytes, nil
}

// Signer signs bundles with an operator's ed25519 key (a dsse.Signer).
type Signer struct {
	key ed25519.PrivateKey
	id  string
}

// LoadSigner reads a private key written by NewKeys.
func LoadSigner(path string) (*Signer, error) {
	der, err := readPEM(path, "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an ed25519 key", path)
	}
	id, err := dsse.SHA256KeyID(priv.Public())
	if err != nil {
		return nil, err
	}
	return &Signer{key: priv, id: id}, nil
}

// Sign signs data (DSSE's pre-authentication encoding of the statement).
func (s *Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

// KeyID is the SHA-256 of the public key.
func (s *Signer) KeyID() (string, error) { return s.id, nil }

// PublicPEM is the public key as NewKeys writes it.
func (s *Signer) PublicPEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(s.key.Public())
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// Verifier checks signatures with a trusted public key (a dsse.Verifier).
type Verifier struct {
	pub ed25519.PublicKey
	id  string
	// From is the file it was read from.
	From string
}

// LoadVerifier reads a public key written by NewKeys.
func LoadVerifier(path string) (*Verifier, error) {
	der, err := readPEM(path, "PUBLIC KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%s is not an ed25519 public key", path)
	}
	id, err := dsse.SHA256KeyID(pub)
	if err != nil {
		return nil, err
	}
	return &Verifier{pub: pub, id: id, From: path}, nil
}

// Verify checks sig over data.
func (v *Verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("ed25519 signature does not verify")
	}
	return nil
}

// KeyID is the SHA-256 of the public key.
func (v *Verifier) KeyID() (string, error) { return v.id, nil }

// Public is the key.
func (v *Verifier) Public() crypto.PublicKey { return v.pub }
