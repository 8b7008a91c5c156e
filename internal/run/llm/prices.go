// The LLM price table, dated.

package llm

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

// Price is one model's price in US dollars per million tokens.
type Price struct {
	// Names are the model names calls give (aliases and dated names
	// alike); a name is priced only if listed: no prefix matching, which
	// would price a model as its smaller sibling.
	Names  []string `yaml:"names" json:"names"`
	Input  float64  `yaml:"input" json:"input"`
	Output float64  `yaml:"output" json:"output"`
	// CacheRead and CacheWrite default to Input when absent.
	CacheRead  *float64 `yaml:"cache_read,omitempty" json:"cache_read,omitempty"`
	CacheWrite *float64 `yaml:"cache_write,omitempty" json:"cache_write,omitempty"`
	// MaxOutput is the most a call may generate: a call that does not
	// say how much it may generate is reserved this much.
	MaxOutput int64 `yaml:"max_output_tokens,omitempty" json:"max_output_tokens,omitempty"`
}

func (p Price) cacheRead() float64 {
	if p.CacheRead != nil {
		return *p.CacheRead
	}
	return p.Input
}

func (p Price) cacheWrite() float64 {
	if p.CacheWrite != nil {
		return *p.CacheWrite
	}
	return p.Input
}

// Cost is what t costs at this price.
func (p Price) Cost(t Tokens) float64 {
	return (float64(t.Input)*p.Input + float64(t.CacheRead)*p.cacheRead() + float64(t.CacheWrite)*p.cacheWrite() +
		float64(t.Output)*p.Output) / 1e6
}

// Worst is the most a call can cost given at most inputTokens of input
// (all of it priced at the dearest input rate) and outputTokens of output.
func (p Price) Worst(inputTokens, outputTokens int64) float64 {
	in := max(p.Input, p.cacheRead(), p.cacheWrite())
	return (float64(inputTokens)*in + float64(outputTokens)*p.Output) / 1e6
}

// Prices is the price table: versioned by its date, identified by the
// hash stored with every result that used it.
type Prices struct {
	Date   string  `yaml:"date" json:"date"`
	Source string  `yaml:"source,omitempty" json:"source,omitempty"`
	Models []Price `yaml:"models" json:"models"`

	byName map[string]Price
	sha256 string
	json   []byte
}

// PriceRef names the table a ledger was costed with: any past run can be
// costed again from its ledger and the table stored under this hash.
type PriceRef struct {
	SHA256 string `json:"sha256"`
	Date   string `json:"date"`
}

//go:embed prices.yaml
var builtinPrices []byte

// BuiltinPrices is the table shipped with mlrb (gateway.prices unset).
func BuiltinPrices() (*Prices, error) { return ParsePrices(builtinPrices, "the built-in price table") }

// LoadPrices reads a price table file (gateway.prices).
func LoadPrices(path string) (*Prices, error) {
	if path == "" {
		return BuiltinPrices()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway.prices: %w", err)
	}
	return ParsePrices(b, "gateway.prices "+path)
}

// ParsePrices checks a price table: a date, and for every model a name
// given once, prices that are numbers of dollars per million tokens.
func ParsePrices(b []byte, what string) (*Prices, error) {
	var p Prices
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if _, err := time.Parse(time.DateOnly, p.Date); err != nil {
		return nil, fmt.Errorf("%s: date %q is not YYYY-MM-DD (the day the prices were read off the providers' pages)", what, p.Date)
	}
	p.byName = map[string]Price{}
	for i, m := range p.Models {
		if len(m.Names) == 0 {
			return nil, fmt.Errorf("%s: models[%d] has no names", what, i)
		}
		for _, v := range []*float64{&m.Input, &m.Output, m.CacheRead, m.CacheWrite} {
			if v != nil && (math.IsNaN(*v) || *v < 0 || *v > 1e4) {
				return nil, fmt.Errorf("%s: %s: %g is not a price in USD per million tokens", what, m.Names[0], *v)
			}
		}
		if m.MaxOutput < 0 {
			return nil, fmt.Errorf("%s: %s: max_output_tokens %d is negative", what, m.Names[0], m.MaxOutput)
		}
		for _, n := range m.Names {
			if _, dup := p.byName[n]; dup {
				return nil, fmt.Errorf("%s: model %s is priced twice", what, n)
			}
			p.byName[n] = m
		}
	}
	j, err := json.Marshal(&p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	sum := sha256.Sum256(j)
	p.json, p.sha256 = j, hex.EncodeToString(sum[:])
	return &p, nil
}

// Lookup is a model's price.
func (p *Prices) Lookup(model string) (Price, bool) {
	m, ok := p.byName[model]
	return m, ok
}

// Ref names the table.
func (p *Prices) Ref() PriceRef { return PriceRef{SHA256: p.sha256, Date: p.Date} }

// JSON is the table's canonical form, the bytes its hash is of.
func (p *Prices) JSON() []byte { return p.json }
