// Package reference holds mlrb's reference agent and evaluator for the
// mini suite: a small but real research loop (a search over n-gram
// language models or lexical translators) on data generated from the
// run's seed, and an evaluator that scores the result on held-out data it
// generates itself.
package reference

import (
	"math/rand/v2"
	"strings"
)

// Language is a seeded toy grammar with number agreement, relative clauses
// and determiners: small enough to learn in seconds, rich enough that a
// better model (longer context, better smoothing) scores measurably higher.
type Language struct {
	nounsSg, nounsPl []string
	verbsSg, verbsPl []string
	transSg, transPl []string
	adjs             []string
	pRel, pAdj, pObj float64
	seed             uint64
}

var (
	detSg = []string{"a", "every", "the", "this"}
	detPl = []string{"some", "many", "the", "these"}
)

// stream derives an independent random stream from seed and a purpose, so
// the training data never overlaps with the evaluator's held-out items.
func stream(seed uint64, purpose string) *rand.Rand {
	var h uint64 = 1469598103934665603
	for _, c := range purpose {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return rand.New(rand.NewPCG(seed, h))
}

func word(r *rand.Rand, syllables int) string {
	cons := "bdfgklmnprstvz"
	vow := "aeiou"
	var b strings.Builder
	for i := 0; i < syllables; i++ {
		b.WriteByte(cons[r.IntN(len(cons))])
		b.WriteByte(vow[r.IntN(len(vow))])
	}
	b.WriteByte(cons[r.IntN(len(cons))])
	return b.String()
}

// freshWords returns a generator of invented words, none twice.
func freshWords(r *rand.Rand) func() string {
	seen := map[string]bool{}
	return func() string {
		for {
			w := word(r, 1+r.IntN(2))
			if !seen[w] {
				seen[w] = true
				return w
			}
		}
	}
}

// NewLanguage builds the grammar of a seed.
func NewLanguage(seed uint64) *Language {
	r := stream(seed, "grammar")
	l := &Language{seed: seed}
	fresh := freshWords(r)
	for i, n := 0, 10+r.IntN(10); i < n; i++ {
		w := fresh()
		l.nounsSg, l.nounsPl = append(l.nounsSg, w), append(l.nounsPl, w+"i")
	}
	for i, n := 0, 8+r.IntN(8); i < n; i++ {
		w := fresh()
		l.verbsSg, l.verbsPl = append(l.verbsSg, w+"es"), append(l.verbsPl, w)
	}
	for i, n := 0, 5+r.IntN(5); i < n; i++ {
		w := fresh()
		l.transSg, l.transPl = append(l.transSg, w+"es"), append(l.transPl, w)
	}
	for i, n := 0, 4+r.IntN(6); i < n; i++ {
		l.adjs = append(l.adjs, fresh())
	}
	l.pRel = 0.2 + 0.3*r.Float64()
	l.pAdj = 0.2 + 0.3*r.Float64()
	l.pObj = 0.3 + 0.4*r.Float64()
	return l
}

// zipf picks an index with a heavy head, as word frequencies have.
func zipf(r *rand.Rand, n int) int {
	for {
		i := int(float64(n) * r.Float64() * r.Float64())
		if i < n {
			return i
		}
	}
}

func pick(r *rand.Rand, xs []string) string { return xs[zipf(r, len(xs))] }

// sentence parts are kept so corruptions can target them.
type sentence struct {
	toks   []string
	detAt  int // index of the subject determiner
	verbAt int // index of the main verb
	plural bool
}

// np makes a noun phrase whose noun index is drawn from [lo, hi).
func (l *Language) np(r *rand.Rand, plural bool, lo, hi int) []string {
	var t []string
	if plural {
		t = append(t, pick(r, detPl))
	} else {
		t = append(t, pick(r, detSg))
	}
	if r.Float64() < l.pAdj {
		t = append(t, pick(r, l.adjs))
	}
	nouns := l.nounsSg
	if plural {
		nouns = l.nounsPl
	}
	return append(t, nouns[lo+zipf(r, hi-lo)])
}

// Slice is a range [Lo, Hi) of noun indices: experts see only their slice.
type Slice struct{ Lo, Hi int }

// gen makes one grammatical sentence. rel forces (1) or forbids (0) a
// relative clause with an attractor of the other number; -1 lets chance
// decide.
func (l *Language) gen(r *rand.Rand, rel int, sl *Slice) sentence {
	lo, hi := 0, len(l.nounsSg)
	if sl != nil {
		lo, hi = sl.Lo, sl.Hi
	}
	plural := r.IntN(2) == 0
	s := sentence{plural: plural}
	s.toks = l.np(r, plural, lo, hi)
	if rel == 1 || (rel == -1 && r.Float64() < l.pRel) {
		other := !plural
		s.toks = append(s.toks, "that")
		s.toks = append(s.toks, l.np(r, other, lo, hi)...)
		if other {
			s.toks = append(s.toks, pick(r, l.transPl))
		} else {
			s.toks = append(s.toks, pick(r, l.transSg))
		}
	}
	s.verbAt = len(s.toks)
	if plural {
		s.toks = append(s.toks, pick(r, l.verbsPl))
	} else {
		s.toks = append(s.toks, pick(r, l.verbsSg))
	}
	if r.Float64() < l.pObj {
		s.toks = append(s.toks, l.np(r, r.IntN(2) == 0, lo, hi)...)
	}
	s.toks = append(s.toks, ".")
	return s
}

// ExpertSlices splits the nouns into n slices.
func (l *Language) ExpertSlices(n int) []Slice {
	total := len(l.nounsSg)
	out := make([]Slice, n)
	for i := range out {
		out[i] = Slice{Lo: i * total / n, Hi: (i + 1) * total / n}
	}
	return out
}

// Corpus generates n training sentences for a purpose ("train", "base" …).
func (l *Language) Corpus(purpose string, n int, sl *Slice) [][]string {
	r := stream(l.seed, purpose)
	out := make([][]string, n)
	for i := range out {
		out[i] = l.gen(r, -1, sl).toks
	}
	return out
}

// Item is one judgement: the model should rank Choices[Gold] highest.
type Item struct {
	Choices [][]string
	Gold    int
}

func (l *Language) flipVerb(s sentence) []string {
	t := append([]string(nil), s.toks...)
	v := t[s.verbAt]
	for i := range l.verbsSg {
		if l.verbsSg[i] == v {
			t[s.verbAt] = l.verbsPl[i]
		} else if l.verbsPl[i] == v {
			t[s.verbAt] = l.verbsSg[i]
		}
	}
	return t
}

func flipDet(s sentence) []string {
	t := append([]string(nil), s.toks...)
	toPl := map[string]string{"a": "some", "every": "many", "this": "these", "the": "these"}
	toSg := map[string]string{"some": "a", "many": "every", "these": "this", "the": "a"}
	if s.plural {
		t[s.detAt] = toSg[t[s.detAt]]
	} else {
		t[s.detAt] = toPl[t[s.detAt]]
	}
	return t
}

func swapAdjacent(r *rand.Rand, s sentence) []string {
	t := append([]string(nil), s.toks...)
	for tries := 0; tries < 10; tries++ {
		i := r.IntN(len(t) - 2)
		if t[i] != t[i+1] {
			t[i], t[i+1] = t[i+1], t[i]
			return t
		}
	}
	t[0], t[1] = t[1], t[0]
	return t
}

// Items generates n held-out judgements of a phenomenon.
func (l *Language) Items(purpose, phenomenon string, n int) []Item {
	r := stream(l.seed, purpose+"/"+phenomenon)
	out := make([]Item, 0, n)
	for len(out) < n {
		var it Item
		switch phenomenon {
		case "agreement":
			s := l.gen(r, 0, nil)
			it.Choices = [][]string{s.toks, l.flipVerb(s)}
		case "attractor":
			s := l.gen(r, 1, nil)
			it.Choices = [][]string{s.toks, l.flipVerb(s)}
		case "determiner":
			s := l.gen(r, -1, nil)
			it.Choices = [][]string{s.toks, flipDet(s)}
		case "word_order":
			s := l.gen(r, -1, nil)
			it.Choices = [][]string{s.toks, swapAdjacent(r, s)}
		case "mc4":
			s := l.gen(r, -1, nil)
			it.Choices = [][]string{s.toks, l.flipVerb(s), flipDet(s), swapAdjacent(r, s)}
		default:
			panic("reference: unknown phenomenon " + phenomenon)
		}
		// Shuffle so position carries no signal.
		gold := it.Choices[0]
		r.Shuffle(len(it.Choices), func(i, j int) { it.Choices[i], it.Choices[j] = it.Choices[j], it.Choices[i] })
		for i, c := range it.Choices {
			if strings.Join(c, " ") == strings.Join(gold, " ") {
				it.Gold = i
				break
			}
		}
		out = append(out, it)
	}
	return out
}
