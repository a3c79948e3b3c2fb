package ratelimit

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The divisors agree with the division instruction on divisors and
// dividends at the edges (powers of two and their neighbours, 1, the
// largest values) and at random.
func TestDivisorMatchesDivision(t *testing.T) {
	var edges []uint64
	for s := range 64 {
		v := uint64(1) << s
		edges = append(edges, v-1, v, v+1)
	}
	edges = append(edges, math.MaxUint64, math.MaxUint64-1, 3, 5, 7, 10, 1e9, 1e9+7, 641, 6700417)
	r := rand.New(rand.NewPCG(18, 18))
	for range 2000 {
		edges = append(edges, r.Uint64()>>r.IntN(64))
	}
	for _, d := range edges {
		if d == 0 {
			continue
		}
		v := newDivisor(d)
		check := func(n uint64) {
			if got, want := v.quo(n), n/d; got != want {
				t.Fatalf("%d / %d: got %d, want %d", n, d, got, want)
			}
		}
		for _, n := range edges {
			check(n)
		}
		for range 200 {
			check(r.Uint64() >> r.IntN(64))
		}
		check(0)
		check(d*3 - 1)
	}
}

// refPolicies are the limits the differential tests run, bucket
// reductions of every shape among them (r = 1, p = 1, both large).
var refLimits = []Limit{
	{Rate: 5, Period: time.Second},
	{Rate: 3, Period: time.Second / 3, Burst: 7},
	{Rate: 100, Period: time.Minute, Burst: 1000},
	{Rate: 7, Period: 10 * time.Nanosecond},
	{Rate: 1 << 30, Period: (1 << 30) * time.Second},
	{Rate: 1e9, Period: time.Second, Burst: 3},
	{Rate: 1, Period: MaxPeriod},
	{Rate: 999983, Period: 1000003 * time.Nanosecond, Burst: 12345},
	{Rate: math.MaxUint32, Period: time.Hour},
}

// runReference replays a trace decoded from data through the current
// arithmetic and the reference (reference_test.go) in lockstep, and fails at
// the first state, outcome, delay or mark that differs. Each step takes 8
// bytes: the op, the cost, and a time step (one in eight backwards).
func runReference(t *testing.T, p Policy, now int64, data []byte) {
	t.Helper()
	var s State
	var mark State
	markN := int64(0)
	for len(data) >= 8 {
		step := data[:8]
		data = data[8:]
		op := step[0] % 8
		n := int64(binary.LittleEndian.Uint16(step[1:3])) % (p.burst + 1)
		dt := int64(binary.LittleEndian.Uint32(step[3:7])) % (2 * p.period)
		if step[7]%8 == 0 {
			dt = -dt / 3
		} else if step[7]%3 == 0 {
			dt %= 1000
		}
		next := now + dt
		if next > 1<<62 || next < -1<<62 {
			continue // beyond the instants a Limit promises to count (MaxPeriod)
		}
		now = next
		switch {
		case op < 5 || !p.alg.reserves():
			gs, go_ := p.take(s, now, n)
			ws, wo := p.refTake(s, now, n)
			if gs != ws || go_ != wo {
				t.Fatalf("%v: take(%+v, %d, %d) = %+v %+v, reference %+v %+v", p, s, now, n, gs, go_, ws, wo)
			}
			if go_.allowed {
				s = gs
			}
		case op < 7:
			if n == 0 {
				n = 1
			}
			wait := int64(binary.LittleEndian.Uint16(step[1:3])) * p.period / 64
			gs, gok, gd, gm := p.reserve(s, now, n, wait)
			ws, wok, wd, wm := p.refReserve(s, now, n, wait)
			if gs != ws || gok != wok || gd != wd || gm != wm {
				t.Fatalf("%v: reserve(%+v, %d, %d, %d) = %+v %v %d %+v, reference %+v %v %d %+v", p, s, now, n, wait, gs, gok, gd, gm, ws, wok, wd, wm)
			}
			if gok {
				s, mark, markN = gs, gm, n
			}
		default:
			if markN == 0 {
				continue
			}
			gs, ws := p.refund(s, now, markN, mark), p.refRefund(s, now, markN, mark)
			if gs != ws {
				t.Fatalf("%v: refund(%+v, %d, %d, %+v) = %+v, reference %+v", p, s, now, markN, mark, gs, ws)
			}
			s, markN = gs, 0
		}
	}
}

// The division-free arithmetic decides exactly as the reference on random
// traces of every constant-state algorithm and limit.
func TestArithmeticMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 18))
	for _, alg := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		for _, lim := range refLimits {
			p, err := NewPolicy(alg, lim)
			if err != nil {
				continue
			}
			for _, start := range []int64{t0.UnixNano(), 0, -int64(time.Hour) - 7} {
				data := make([]byte, 8*3000)
				for i := range data {
					data[i] = byte(r.Uint32())
				}
				runReference(t, p, start, data)
			}
		}
	}
}

// FuzzArithmeticMatchesReference is TestArithmeticMatchesReference on
// fuzzed limits and traces: the old and the new arithmetic, step by step.
func FuzzArithmeticMatchesReference(f *testing.F) {
	f.Add(uint8(TokenBucket), int64(100), int64(time.Second), int64(500), int64(0), []byte("0123456789abcdef01234567"))
	f.Add(uint8(GCRA), int64(3), int64(10), int64(0), int64(-5), []byte("\x05\xff\xff\x00\x01\x02\x03\x00"))
	f.Add(uint8(SlidingWindow), int64(math.MaxUint32), int64(1<<40), int64(0), int64(1<<62), []byte("\x00\x10\x00\xff\xff\xff\xff\x01"))
	f.Add(uint8(FixedWindow), int64(1), int64(1), int64(0), int64(0), []byte("\x00\x01\x00\x01\x00\x00\x00\x01"))
	f.Fuzz(func(t *testing.T, alg uint8, rate, period, burst, start int64, data []byte) {
		if rate <= 0 || period <= 0 || burst < 0 || rate > math.MaxInt32*2 || burst > math.MaxInt32*2 {
			return
		}
		p, err := NewPolicy(Algorithm(alg), Limit{Rate: int(rate), Period: time.Duration(period), Burst: int(burst)})
		if err != nil || p.alg == SlidingLog {
			return
		}
		// Instants stay within what MaxPeriod promises: until 2190.
		start %= 1 << 62
		runReference(t, p, start, data)
	})
}
