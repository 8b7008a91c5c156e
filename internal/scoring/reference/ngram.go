package reference

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// NGram is an interpolated (Jelinek-Mercer) n-gram language model. Its
// parameters are its stored n-gram counts.
type NGram struct {
	Order  int            `json:"order"`
	Lambda float64        `json:"lambda"`
	Vocab  []string       `json:"vocab"`
	Counts map[string]int `json:"counts"` // "h1 h2|w" -> count; "|w" for unigrams
	ctx    map[string]int
	vocab  map[string]bool
}

const bos = "<s>"

// Train counts every n-gram up to order in the corpus.
func Train(corpus [][]string, order int, lambda float64) *NGram {
	m := &NGram{Order: order, Lambda: lambda, Counts: map[string]int{}}
	vocab := map[string]bool{}
	for _, s := range corpus {
		toks := append([]string{bos}, s...)
		for i := 1; i < len(toks); i++ {
			vocab[toks[i]] = true
			for n := 1; n <= order && i-n+1 >= 0; n++ {
				m.Counts[strings.Join(toks[i-n+1:i], " ")+"|"+toks[i]]++
			}
		}
	}
	for w := range vocab {
		m.Vocab = append(m.Vocab, w)
	}
	sort.Strings(m.Vocab)
	m.index()
	return m
}

func (m *NGram) index() {
	m.ctx = map[string]int{}
	m.vocab = map[string]bool{}
	for _, w := range m.Vocab {
		m.vocab[w] = true
	}
	for k, c := range m.Counts {
		m.ctx[k[:strings.LastIndexByte(k, '|')]] += c
	}
}

// Params is the number of stored n-gram counts.
func (m *NGram) Params() int64 { return int64(len(m.Counts)) }

// prob is P(w | history) with interpolation down to an add-one unigram.
func (m *NGram) prob(hist []string, w string) float64 {
	v := float64(len(m.Vocab) + 1)
	p := (float64(m.Counts["|"+w]) + 1) / (float64(m.ctx[""]) + v)
	for n := 1; n < m.Order && n <= len(hist); n++ {
		h := strings.Join(hist[len(hist)-n:], " ")
		c := m.ctx[h]
		if c == 0 {
			break
		}
		p = m.Lambda*float64(m.Counts[h+"|"+w])/float64(c) + (1-m.Lambda)*p
	}
	return p
}

// LogProb scores a sentence.
func (m *NGram) LogProb(s []string) float64 {
	toks := append([]string{bos}, s...)
	lp := 0.0
	for i := 1; i < len(toks); i++ {
		lo := i - m.Order + 1
		if lo < 0 {
			lo = 0
		}
		lp += math.Log(m.prob(toks[lo:i], toks[i]))
	}
	return lp
}

// Perplexity over a held-out corpus.
func (m *NGram) Perplexity(corpus [][]string) float64 {
	lp, n := 0.0, 0
	for _, s := range corpus {
		lp += m.LogProb(s)
		n += len(s)
	}
	return math.Exp(-lp / float64(n))
}

// Prune drops n-grams of order >= 2 seen fewer than min times.
func (m *NGram) Prune(min int) *NGram {
	out := &NGram{Order: m.Order, Lambda: m.Lambda, Vocab: m.Vocab, Counts: map[string]int{}}
	for k, c := range m.Counts {
		if c >= min || strings.HasPrefix(k, "|") {
			out.Counts[k] = c
		}
	}
	out.index()
	return out
}

// Truncate keeps n-grams up to a lower order.
func (m *NGram) Truncate(order int) *NGram {
	out := &NGram{Order: order, Lambda: m.Lambda, Vocab: m.Vocab, Counts: map[string]int{}}
	for k, c := range m.Counts {
		if strings.Count(k[:strings.LastIndexByte(k, '|')], " ")+2 <= order || strings.HasPrefix(k, "|") {
			out.Counts[k] = c
		}
	}
	out.index()
	return out
}

// Merge mixes models by weighted counts (a merge, not a training run).
func Merge(models []*NGram, weights []float64, lambda float64) *NGram {
	out := &NGram{Lambda: lambda, Counts: map[string]int{}}
	vocab := map[string]bool{}
	for i, m := range models {
		if m.Order > out.Order {
			out.Order = m.Order
		}
		for _, w := range m.Vocab {
			vocab[w] = true
		}
		for k, c := range m.Counts {
			out.Counts[k] += int(math.Round(weights[i] * float64(c)))
		}
	}
	for k, c := range out.Counts {
		if c == 0 {
			delete(out.Counts, k)
		}
	}
	for w := range vocab {
		out.Vocab = append(out.Vocab, w)
	}
	sort.Strings(out.Vocab)
	out.index()
	return out
}

// modelConfig is written beside the weights, shaped like a Hugging Face
// config.json so model discovery and constraint checks treat it alike.
type modelConfig struct {
	ModelType     string `json:"model_type"`
	Order         int    `json:"order,omitempty"`
	NumParameters int64  `json:"num_parameters"`
	TorchDtype    string `json:"torch_dtype"`
}

// Save writes the model as dir/{config.json,model.json}, replacing dir
// atomically so a crash never leaves half a model.
func (m *NGram) Save(dir string) error {
	return saveModelDir(dir, modelConfig{ModelType: "mlrb-ngram", Order: m.Order, NumParameters: m.Params(), TorchDtype: "float32"}, m)
}

// LoadNGram reads a model saved by Save.
func LoadNGram(dir string) (*NGram, error) {
	var m NGram
	if err := readJSON(filepath.Join(dir, "model.json"), &m); err != nil {
		return nil, err
	}
	if m.Order < 1 || m.Counts == nil {
		return nil, fmt.Errorf("%s: not an n-gram model", dir)
	}
	m.index()
	return &m, nil
}

func saveModelDir(dir string, cfg modelConfig, model any) error {
	tmp := dir + ".tmp"
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(tmp, "config.json"), cfg); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(tmp, "model.json"), model); err != nil {
		return err
	}
	old := dir + ".old"
	_ = os.RemoveAll(old)
	if _, err := os.Stat(dir); err == nil {
		if err := os.Rename(dir, old); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return os.RemoveAll(old)
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
