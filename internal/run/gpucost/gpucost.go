// The GPU price table, dated and hashed.

// Package gpucost prices GPU time: a table of US dollars per GPU-hour by
// host class, dated and hashed like the LLM price table, so that a run's
// GPU dollars stand beside its LLM dollars and can be costed again.
package gpucost

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"gopkg.in/yaml.v3"
)

// Table is the price table.
type Table struct {
	Date   string             `yaml:"date" json:"date"`
	Source string             `yaml:"source,omitempty" json:"source,omitempty"`
	GPUs   map[string]float64 `yaml:"gpus" json:"gpus"`

	sha256 string
	json   []byte
}

// Ref names the table and the rate a result was costed with.
type Ref struct {
	SHA256 string `json:"sha256"`
	Date   string `json:"date"`
	// Class and USDPerGPUHour are the host class priced and its rate.
	Class         string  `json:"class"`
	USDPerGPUHour float64 `json:"usd_per_gpu_hour"`
}

//go:embed prices.yaml
var builtin []byte

// Load reads a table file (cost.gpu_prices; "": the built-in one).
func Load(path string) (*Table, error) {
	if path == "" {
		return Parse(builtin, "the built-in GPU price table")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cost.gpu_prices: %w", err)
	}
	return Parse(b, "cost.gpu_prices "+path)
}

// Parse checks a table: a date, and a price per class that is a finite,
// non-negative number of dollars.
func Parse(b []byte, what string) (*Table, error) {
	var t Table
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := time.Parse(time.DateOnly, t.Date); err != nil {
		return nil, fmt.Errorf("%s: date %q is not YYYY-MM-DD (the day the prices were read)", what, t.Date)
	}
	for class, usd := range t.GPUs {
		if usd < 0 || math.IsNaN(usd) || math.IsInf(usd, 0) {
			return nil, fmt.Errorf("%s: %s costs %v dollars an hour: want a number from 0", what, class, usd)
		}
	}
	canon, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canon)
	t.sha256, t.json = hex.EncodeToString(sum[:]), canon
	return &t, nil
}

// SHA256 is the table's hash, which names it in the store
// (keys.GPUPrices) beside the runs it costs.
func (t *Table) SHA256() string { return t.sha256 }

// JSON is the table as hashed.
func (t *Table) JSON() []byte { return t.json }

// Rate is the price of one GPU-hour of class, and the reference a result
// keeps; false when the table has no price for it.
func (t *Table) Rate(class string) (Ref, bool) {
	usd, ok := t.GPUs[class]
	return Ref{SHA256: t.sha256, Date: t.Date, Class: class, USDPerGPUHour: usd}, ok
}
