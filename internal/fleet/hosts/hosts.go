// The fleet register: each worker's host record in the store.

// Package hosts is the fleet's register: each worker publishes what its
// host is and holds (GPU type, slots, leases) in the blob store, which
// every worker and starter of a deployment share, and `starter hosts`
// reads it.
package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mlrb/mlrb/internal/fleet/gpu"
	"github.com/mlrb/mlrb/internal/store/blob"
	"github.com/mlrb/mlrb/internal/store/keys"
)

// Record is one host as its worker last published it.
type Record struct {
	ID        string      `json:"id"`
	Queue     string      `json:"queue"`
	GPUType   string      `json:"gpu_type,omitempty"`
	Devices   []int       `json:"devices,omitempty"`
	Slots     int         `json:"slots"`
	Leases    []gpu.Lease `json:"leases"`
	Worker    string      `json:"worker"` // Identity of the worker process
	StartedAt time.Time   `json:"started_at"`
	SeenAt    time.Time   `json:"seen_at"`
	// Stopped is set by a worker that stopped cleanly.
	Stopped bool `json:"stopped,omitempty"`
	// Source and SourceID say where a provisioned host came from
	// (slurm and its job id); static hosts have none.
	Source   string `json:"provider,omitempty"`
	SourceID string `json:"provider_id,omitempty"`
	// IdleSince is when the host last had no lease (zero while busy).
	IdleSince time.Time `json:"idle_since,omitempty"`
	// Attach is where people reach their runs' shells through this host
	// (nil: nowhere), and the SHA-256 of its certificate, which they pin.
	Attach *Attach `json:"attach,omitempty"`
}

// Attach is a host's attach server.
type Attach struct {
	Addr string `json:"addr"`
	Pin  string `json:"pin"`
}

// Free is the slots not leased.
func (r Record) Free() int { return max(0, r.Slots-len(r.Leases)) }

const prefix = keys.Hosts

// maxRecord bounds a host record (its leases included) as read.
const maxRecord = 1 << 20

func key(id string) string { return keys.Host(id) }

// Put publishes a host's record.
func Put(ctx context.Context, s blob.Store, r Record) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("host %s: %w", r.ID, err)
	}
	if err := s.Put(ctx, key(r.ID), bytes.NewReader(b)); err != nil {
		return fmt.Errorf("host %s: %w", r.ID, err)
	}
	return nil
}

// Delete removes a host's record: a provisioned host's id serves one
// attempt and is never seen again.
func Delete(ctx context.Context, s blob.Store, id string) error {
	if err := s.Delete(ctx, key(id)); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("host %s: %w", id, err)
	}
	return nil
}

// Get reads one host's record; ok is false when it has none.
func Get(ctx context.Context, s blob.Store, id string) (r Record, ok bool, err error) {
	err = blob.ReadJSON(ctx, s, key(id), maxRecord, &r)
	if errors.Is(err, blob.ErrNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("host %s: %w", id, err)
	}
	return r, true, nil
}

// List reads every host's record, by id.
func List(ctx context.Context, s blob.Store) ([]Record, error) {
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	var out []Record
	for _, o := range objs {
		id, err := url.PathUnescape(strings.TrimSuffix(strings.TrimPrefix(o.Key, prefix), ".json"))
		if err != nil || strings.Contains(id, "/") {
			continue
		}
		r, ok, err := Get(ctx, s, id)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Identity names a worker process by where it runs, not by its pid, so
// that a worker restarted in place is recognised as the same one.
func Identity(hostID, workDir string) string {
	name, _ := os.Hostname()
	if abs, err := filepath.Abs(workDir); err == nil {
		workDir = abs
	}
	return fmt.Sprintf("mlrb %s@%s:%s", hostID, name, workDir)
}
