package ratelimittest_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/ratelimittest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStore(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T) ratelimit.Store {
		m, err := ratelimit.NewMemoryStore(1 << 16)
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// decideStore keeps State in a map and decides with the pure functions of
// Policy alone, as a remote store would: it shows that Decide, Reserve and
// Refund are all such a store needs for the constant-state algorithms.
// SlidingLog and batches, which never share keys with the rest in the
// suite, go to a MemoryStore.
type decideStore struct {
	states map[string]ratelimit.State
	rest   *ratelimit.MemoryStore
}

func (d *decideStore) Apply(ctx context.Context, now time.Time, reqs []ratelimit.Request) error {
	if len(reqs) != 1 || reqs[0].Policy.Algorithm() == ratelimit.SlidingLog {
		return d.rest.Apply(ctx, now, reqs)
	}
	r := &reqs[0]
	k := r.Policy.String() + "\x00" + r.Key
	s, ns := d.states[k], now.UnixNano()
	next := s
	var err error
	switch r.Op {
	case ratelimit.OpAllow:
		next, r.Result, err = r.Policy.Decide(s, ns, r.N)
		if !r.Result.Allowed {
			next = s
		}
	case ratelimit.OpReserve:
		wait := r.MaxWait
		switch {
		case wait == 0:
			wait = math.MaxInt64
		case wait < 0:
			wait = 0
		}
		var ok bool
		next, ok, r.Delay, r.Mark, err = r.Policy.Reserve(s, ns, r.N, wait)
		if err == nil {
			_, r.Result, _ = r.Policy.Decide(next, ns, 0)
			r.Result.Allowed = ok
		}
	case ratelimit.OpRefund:
		next, err = r.Policy.Refund(s, ns, r.N, r.Mark)
		if err == nil {
			_, r.Result, _ = r.Policy.Decide(next, ns, 0)
		}
	}
	if err != nil {
		return err
	}
	if next == (ratelimit.State{}) {
		delete(d.states, k)
	} else {
		d.states[k] = next
	}
	return nil
}

func TestDecideStore(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T) ratelimit.Store {
		m, _ := ratelimit.NewMemoryStore(1 << 16)
		return &decideStore{states: map[string]ratelimit.State{}, rest: m}
	})
}
