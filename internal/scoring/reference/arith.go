package reference

import (
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Arith is a seeded toy autoformalization problem: informal arithmetic
// statements in an invented language, and their formal form "a + b = c".
type Arith struct {
	numbers []string   // word for 0..20
	ops     [][]string // per operator, phrase variants
	eqs     []string
	seed    uint64
}

var opSyms = []string{"+", "-", "*"}

// NewArith builds the invented language of a seed.
func NewArith(seed uint64) *Arith {
	r := stream(seed, "arith")
	a := &Arith{seed: seed}
	fresh := freshWords(r)
	for i := 0; i <= 20; i++ {
		a.numbers = append(a.numbers, fresh())
	}
	fillers := []string{fresh(), fresh()}
	for range opSyms {
		var variants []string
		for v, n := 0, 2+r.IntN(2); v < n; v++ {
			p := fresh()
			if r.IntN(2) == 0 {
				p += " " + fillers[r.IntN(2)] // a two-word phrase with a shared filler
			}
			variants = append(variants, p)
		}
		a.ops = append(a.ops, variants)
	}
	for i, n := 0, 2+r.IntN(3); i < n; i++ {
		a.eqs = append(a.eqs, fresh())
	}
	return a
}

// Pair is one informal statement and its formal form.
type Pair struct {
	Informal []string
	Formal   []string
}

// Pairs generates n true statements for a purpose.
func (a *Arith) Pairs(purpose string, n int) []Pair {
	r := stream(a.seed, purpose)
	out := make([]Pair, n)
	for i := range out {
		op := r.IntN(len(opSyms))
		var x, y, z int
		for {
			x, y = r.IntN(11), r.IntN(11)
			switch op {
			case 0:
				z = x + y
			case 1:
				z = x - y
			case 2:
				z = x * y
			}
			if z >= 0 && z <= 20 {
				break
			}
		}
		var inf []string
		inf = append(inf, a.numbers[x])
		inf = append(inf, strings.Fields(a.ops[op][r.IntN(len(a.ops[op]))])...)
		inf = append(inf, a.numbers[y], a.eqs[r.IntN(len(a.eqs))], a.numbers[z])
		out[i] = Pair{Informal: inf, Formal: []string{strconv.Itoa(x), opSyms[op], strconv.Itoa(y), "=", strconv.Itoa(z)}}
	}
	return out
}

// Lexicon translates word by word: each informal word maps to one formal
// token or to nothing. It is learnt from co-occurrence (Dice coefficient).
type Lexicon struct {
	Threshold float64           `json:"threshold"`
	Dedup     bool              `json:"dedup"`
	Map       map[string]string `json:"map"`
}

// TrainLexicon learns a lexicon: a word maps to its most associated token
// if the association reaches threshold.
func TrainLexicon(pairs []Pair, threshold float64, dedup bool) *Lexicon {
	cw, ct := map[string]int{}, map[string]int{}
	co := map[[2]string]int{}
	for _, p := range pairs {
		ws, ts := set(p.Informal), set(p.Formal)
		for w := range ws {
			cw[w]++
			for t := range ts {
				co[[2]string{w, t}]++
			}
		}
		for t := range ts {
			ct[t]++
		}
	}
	best := map[string]float64{}
	lex := &Lexicon{Threshold: threshold, Dedup: dedup, Map: map[string]string{}}
	keys := make([][2]string, 0, len(co))
	for k := range co {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	for _, k := range keys {
		d := 2 * float64(co[k]) / float64(cw[k[0]]+ct[k[1]])
		if d >= threshold && d > best[k[0]] {
			best[k[0]] = d
			lex.Map[k[0]] = k[1]
		}
	}
	return lex
}

func set(xs []string) map[string]bool {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return m
}

// Translate maps an informal statement to formal tokens.
func (l *Lexicon) Translate(inf []string) []string {
	var out []string
	for _, w := range inf {
		t, ok := l.Map[w]
		if !ok {
			continue
		}
		if l.Dedup && len(out) > 0 && out[len(out)-1] == t {
			continue
		}
		out = append(out, t)
	}
	return out
}

// Params is the number of lexicon entries.
func (l *Lexicon) Params() int64 { return int64(len(l.Map)) }

// Save writes the lexicon as a model dir.
func (l *Lexicon) Save(dir string) error {
	return saveModelDir(dir, modelConfig{ModelType: "mlrb-lexicon", NumParameters: l.Params(), TorchDtype: "float32"}, l)
}

// LoadLexicon reads a lexicon saved by Save.
func LoadLexicon(dir string) (*Lexicon, error) {
	var l Lexicon
	if err := readJSON(filepath.Join(dir, "model.json"), &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// BLEU is smoothed sentence BLEU-4 (add-one on n-gram precisions) with the
// brevity penalty.
func BLEU(hyp, ref []string) float64 {
	if len(hyp) == 0 {
		return 0
	}
	logp := 0.0
	for n := 1; n <= 4; n++ {
		refC := map[string]int{}
		for i := 0; i+n <= len(ref); i++ {
			refC[strings.Join(ref[i:i+n], " ")]++
		}
		match, total := 0, 0
		for i := 0; i+n <= len(hyp); i++ {
			g := strings.Join(hyp[i:i+n], " ")
			if refC[g] > 0 {
				refC[g]--
				match++
			}
			total++
		}
		logp += math.Log(float64(match+1) / float64(total+1))
	}
	bp := 1.0
	if len(hyp) < len(ref) {
		bp = math.Exp(1 - float64(len(ref))/float64(len(hyp)))
	}
	return bp * math.Exp(logp/4)
}

// Checks tells whether a formal statement parses and is true.
func Checks(f []string) bool {
	if len(f) != 5 || f[3] != "=" {
		return false
	}
	x, e1 := strconv.Atoi(f[0])
	y, e2 := strconv.Atoi(f[2])
	z, e3 := strconv.Atoi(f[4])
	if e1 != nil || e2 != nil || e3 != nil {
		return false
	}
	switch f[1] {
	case "+":
		return x+y == z
	case "-":
		return x-y == z
	case "*":
		return x*y == z
	}
	return false
}
