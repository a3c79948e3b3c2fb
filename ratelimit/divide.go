package ratelimit

import "math/bits"

// divisor divides unsigned 64-bit integers by a constant d ≥ 1 exactly,
// without a division instruction: one 64×64→128-bit multiplication, a
// subtraction, an addition and two shifts. A 64-bit DIV costs 30–40 cycles
// on the processors this was measured on, and a bucket decision needed
// three of them; a policy's divisors are fixed, so their reciprocals are
// computed once, in NewPolicy.
//
// The method is Granlund and Montgomery's ("Division by Invariant Integers
// using Multiplication", PLDI 1994, Figure 4.1), exact for every dividend
// n < 2^64: with ℓ = ⌈log2 d⌉ and m = ⌊2^64·(2^ℓ − d)/d⌋ + 1,
//
//	t = ⌊m·n / 2^64⌋,   ⌊n/d⌋ = (t + ((n − t) >> min(ℓ, 1))) >> max(ℓ − 1, 0)
//
// The fields are comparable, so a Policy holding divisors stays a
// comparable value, equal exactly when its limit is.
type divisor struct {
	d      uint64
	m      uint64
	s1, s2 uint8
}

// newDivisor returns the divisor of d ≥ 1.
func newDivisor(d uint64) divisor {
	if d == 0 {
		panic("sluice/ratelimit: division by zero")
	}
	l := uint(bits.Len64(d - 1)) // ⌈log2 d⌉
	hi := -d                     // 2^64 − d, for ℓ = 64
	if l < 64 {
		hi = 1<<l - d
	}
	// hi < d because 2^(ℓ−1) < d ≤ 2^ℓ, so the 128-by-64 division fits.
	q, _ := bits.Div64(hi, 0, d)
	v := divisor{d: d, m: q + 1}
	if l > 0 {
		v.s1, v.s2 = 1, uint8(l-1)
	}
	return v
}

// quo returns ⌊n/d⌋.
func (v *divisor) quo(n uint64) uint64 {
	t, _ := bits.Mul64(v.m, n)
	return (t + (n-t)>>v.s1) >> v.s2
}

// div returns ⌊n/d⌋ for n ≥ 0.
func (v *divisor) div(n int64) int64 { return int64(v.quo(uint64(n))) }

// ceil returns ⌈n/d⌉ for n ≥ 0.
func (v *divisor) ceil(n int64) int64 {
	q := v.quo(uint64(n))
	if q*v.d != uint64(n) {
		q++
	}
	return int64(q)
}

// divMod returns ⌊n/d⌋ and n mod d for n ≥ 0.
func (v *divisor) divMod(n int64) (q, r int64) {
	uq := v.quo(uint64(n))
	return int64(uq), n - int64(uq*v.d)
}

// floorDivMod returns ⌊a/d⌋ and a − d·⌊a/d⌋ for any a (an instant before
// 1970 is negative; that rare case takes the division instruction).
func (v *divisor) floorDivMod(a int64) (q, r int64) {
	if a >= 0 {
		return v.divMod(a)
	}
	return floorDivMod(a, int64(v.d))
}

// mulDivCeil returns ⌈a·b/d⌉ for non-negative a and b with a·b/d < 2^63:
// without a division when a·b < 2^64 (for a sliding window, prev·(Period −
// e): up to 2^22 units per window of an hour), through a 128-bit division
// otherwise.
func (v *divisor) mulDivCeil(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi == 0 {
		return v.ceil64(lo)
	}
	q, r := bits.Div64(hi, lo, v.d)
	if r != 0 {
		q++
	}
	return int64(q)
}

// ceil64 returns ⌈n/d⌉ for any unsigned n whose quotient fits an int64.
func (v *divisor) ceil64(n uint64) int64 {
	q := v.quo(n)
	if q*v.d != n {
		q++
	}
	return int64(q)
}
