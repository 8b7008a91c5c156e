// Statistics: Student's t, Wilson, the bootstrap, power.

package leaderboard

import (
	"math"
	"math/rand/v2"
	"sort"

	"gonum.org/v1/gonum/stat/distuv"
)

// The interval estimators the leaderboard uses, each honest at the few
// seeds a 24 h task affords: Student's t for means (the percentile
// bootstrap at 3 seeds is the min–max, which covers the mean about 75 %
// of the time), Wilson's for a success rate (exact enough at n = 3, never
// outside [0, 1]).

// BootstrapFrom is the fewest scores at which a mean's interval is the
// percentile bootstrap's instead of Student's t: below it the bootstrap
// undercovers (at n = 3 it is the min and max of the seeds).
const BootstrapFrom = 30

// MeanStd returns the mean and the sample standard deviation (n-1).
func MeanStd(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	mean := sum / float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(xs)-1))
}

// tQuantile is Student's t quantile p on df degrees of freedom.
func tQuantile(p float64, df float64) float64 { return studentsT(df).Quantile(p) }

func studentsT(df float64) distuv.StudentsT { return distuv.StudentsT{Mu: 0, Sigma: 1, Nu: df} }

// TInterval is the 95 % Student t interval of the mean of xs (NaN under
// two values).
func TInterval(xs []float64) (lo, hi float64) {
	n := len(xs)
	if n < 2 {
		return math.NaN(), math.NaN()
	}
	m, s := MeanStd(xs)
	half := tQuantile(0.975, float64(n-1)) * s / math.Sqrt(float64(n))
	return m - half, m + half
}

// MeanInterval is the 95 % interval of the mean of xs and the method that
// made it: Student's t below BootstrapFrom values, the seeded percentile
// bootstrap from there.
func MeanInterval(xs []float64) (lo, hi float64, method string) {
	if len(xs) >= BootstrapFrom {
		lo, hi = BootstrapCI(xs, 2000, 0.95, 42)
		return lo, hi, "bootstrap"
	}
	lo, hi = TInterval(xs)
	return lo, hi, "t"
}

// Wilson is the 95 % Wilson score interval of k successes in n trials.
func Wilson(k, n int) (lo, hi float64) {
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	z := distuv.UnitNormal.Quantile(0.975)
	p, nf := float64(k)/float64(n), float64(n)
	den := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / den
	half := z / den * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf))
	return math.Max(0, center-half), math.Min(1, center+half)
}

// BootstrapCI is the percentile bootstrap interval of the mean: resample
// with replacement, seeded so that a leaderboard is reproducible. Use it
// only with many values (BootstrapFrom).
func BootstrapCI(xs []float64, resamples int, level float64, seed uint64) (float64, float64) {
	if len(xs) == 0 {
		return math.NaN(), math.NaN()
	}
	r := rand.New(rand.NewPCG(seed, uint64(len(xs))))
	means := make([]float64, resamples)
	for i := range means {
		sum := 0.0
		for range xs {
			sum += xs[r.IntN(len(xs))]
		}
		means[i] = sum / float64(len(xs))
	}
	sort.Float64s(means)
	lo := int(math.Floor((1 - level) / 2 * float64(resamples)))
	hi := int(math.Ceil((1+level)/2*float64(resamples))) - 1
	return means[lo], means[min(hi, resamples-1)]
}

// Power: α = 0.05 two-sided, 80 % power.
const (
	alpha = 0.05
	power = 0.8
)

// tSum is t₁₋α/₂ + t_power on df degrees of freedom: the multiple of
// the standard error a true difference must reach to be detected.
func tSum(df float64) float64 {
	return tQuantile(1-alpha/2, df) + tQuantile(power, df)
}

// PairedSeeds is the seeds a paired t-test needs to detect delta when
// the differences spread sigma: the least n with (t₀.₉₇₅,ₙ₋₁ + t₀.₈,ₙ₋₁)·σ/√n
// ≤ δ (0 for a zero sigma: any two seeds).
func PairedSeeds(sigma, delta float64) int {
	if sigma <= 0 {
		return 2
	}
	for n := 2; n < 1_000_000; n++ {
		if tSum(float64(n-1))*sigma/math.Sqrt(float64(n)) <= delta {
			return n
		}
	}
	return 1_000_000
}

// UnpairedSeeds is the seeds per agent a two-sample t-test (equal n and
// spread) needs to detect delta: the least n with (t₀.₉₇₅ + t₀.₈ on 2n−2
// df)·σ·√(2/n) ≤ δ.
func UnpairedSeeds(sigma, delta float64) int {
	if sigma <= 0 {
		return 2
	}
	for n := 2; n < 1_000_000; n++ {
		if tSum(float64(2*n-2))*sigma*math.Sqrt(2/float64(n)) <= delta {
			return n
		}
	}
	return 1_000_000
}

// PairedMDD is the smallest difference n paired seeds detect (NaN under
// two seeds).
func PairedMDD(sigma float64, n int) float64 {
	if n < 2 {
		return math.NaN()
	}
	return tSum(float64(n-1)) * sigma / math.Sqrt(float64(n))
}

// UnpairedMDD is the smallest difference from another agent of the same
// spread and seeds that n seeds detect (NaN under two seeds).
func UnpairedMDD(sigma float64, n int) float64 {
	if n < 2 {
		return math.NaN()
	}
	return tSum(float64(2*n-2)) * sigma * math.Sqrt(2/float64(n))
}
