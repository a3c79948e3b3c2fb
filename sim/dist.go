package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// DistKind names a family of service-time distributions.
type DistKind uint8

// The distribution families.
const (
	// Exponential: memoryless, mean Mean.
	Exponential DistKind = iota
	// Constant: always Mean.
	Constant
	// Lognormal: mean Mean with log-space standard deviation Sigma.
	Lognormal
	// Bimodal: Long with probability P, Short otherwise.
	Bimodal
)

// Dist is a distribution of durations. The zero Dist is the constant 0.
type Dist struct {
	Kind  DistKind
	Mean  time.Duration // Exponential, Constant, Lognormal
	Sigma float64       // Lognormal
	Short time.Duration // Bimodal
	Long  time.Duration // Bimodal
	P     float64       // Bimodal: probability of Long
}

// Exp returns an exponential distribution with the given mean.
func Exp(mean time.Duration) Dist { return Dist{Kind: Exponential, Mean: mean} }

// Const returns the constant distribution d.
func Const(d time.Duration) Dist { return Dist{Kind: Constant, Mean: d} }

// LogNormal returns a lognormal distribution with the given mean and
// log-space standard deviation sigma.
func LogNormal(mean time.Duration, sigma float64) Dist {
	return Dist{Kind: Lognormal, Mean: mean, Sigma: sigma}
}

// TwoPoint returns the bimodal distribution: long with probability p, short
// otherwise.
func TwoPoint(short, long time.Duration, p float64) Dist {
	return Dist{Kind: Bimodal, Short: short, Long: long, P: p}
}

// MeanValue returns the distribution's mean.
func (d Dist) MeanValue() time.Duration {
	if d.Kind == Bimodal {
		return time.Duration((1-d.P)*float64(d.Short) + d.P*float64(d.Long))
	}
	return d.Mean
}

// Median returns the distribution's median: ln 2 · mean (exponential),
// mean · e^(−σ²/2) (lognormal), the more likely point (bimodal; their mean
// at P = ½).
func (d Dist) Median() time.Duration {
	switch d.Kind {
	case Exponential:
		return time.Duration(math.Round(math.Ln2 * float64(d.Mean)))
	case Lognormal:
		return time.Duration(math.Round(float64(d.Mean) * math.Exp(-d.Sigma*d.Sigma/2)))
	case Bimodal:
		switch {
		case d.P < 0.5:
			return d.Short
		case d.P > 0.5:
			return d.Long
		}
		return (d.Short + d.Long) / 2
	}
	return d.Mean
}

// IsZero reports whether the distribution is the constant 0.
func (d Dist) IsZero() bool { return d.MeanValue() == 0 }

func (d Dist) validate(what string) error {
	switch d.Kind {
	case Exponential, Constant:
		if d.Mean < 0 {
			return fmt.Errorf("sim: %s mean %v: must not be negative", what, d.Mean)
		}
	case Lognormal:
		if d.Mean <= 0 || !(d.Sigma >= 0 && d.Sigma <= 5) {
			return fmt.Errorf("sim: %s lognormal(mean %v, sigma %v): need mean > 0 and 0 ≤ sigma ≤ 5", what, d.Mean, d.Sigma)
		}
	case Bimodal:
		if d.Short < 0 || d.Long < d.Short || !(d.P >= 0 && d.P <= 1) {
			return fmt.Errorf("sim: %s bimodal(%v, %v, p=%v): need 0 ≤ short ≤ long and p in [0, 1]", what, d.Short, d.Long, d.P)
		}
	default:
		return errors.New("sim: " + what + ": unknown distribution kind")
	}
	return nil
}

// sample draws one duration in nanoseconds, scaled by f.
func (d Dist) sample(r *rand.Rand, f float64) int64 {
	var x float64
	switch d.Kind {
	case Exponential:
		x = r.ExpFloat64() * float64(d.Mean)
	case Constant:
		x = float64(d.Mean)
	case Lognormal:
		// E[X] = exp(μ + σ²/2) = Mean  ⇒  μ = ln(Mean) − σ²/2.
		mu := math.Log(float64(d.Mean)) - d.Sigma*d.Sigma/2
		x = math.Exp(mu + d.Sigma*r.NormFloat64())
	case Bimodal:
		x = float64(d.Short)
		if r.Float64() < d.P {
			x = float64(d.Long)
		}
	}
	return int64(x * f)
}

// String describes the distribution, e.g. "exp(5ms)".
func (d Dist) String() string {
	switch d.Kind {
	case Exponential:
		return fmt.Sprintf("exp(%v)", d.Mean)
	case Constant:
		return fmt.Sprintf("const(%v)", d.Mean)
	case Lognormal:
		return fmt.Sprintf("lognormal(%v, σ=%v)", d.Mean, d.Sigma)
	case Bimodal:
		return fmt.Sprintf("bimodal(%v, %v@%v)", d.Short, d.Long, d.P)
	}
	return "?"
}
