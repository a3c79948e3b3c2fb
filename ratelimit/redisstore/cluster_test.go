package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// TestCluster runs on a three-master Redis Cluster: single decisions for
// every algorithm on keys spread over the masters, multi-policy on one key,
// tiers over several keys given one hash tag, and the clear error for a
// batch whose keys lie in different slots.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	cl := redistest.StartCluster(t)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	s := newStore(t, c)
	if err := s.Preload(ctx); err != nil {
		t.Fatal(err)
	}

	for _, alg := range algs {
		l, err := ratelimit.New(alg, ratelimit.Limit{Rate: 3, Period: time.Hour}, ratelimit.WithStore(s))
		if err != nil {
			t.Fatal(err)
		}
		for k := range 20 { // 20 keys land on all three masters
			key := fmt.Sprint("user:", k)
			for i := range 4 {
				res, err := l.Allow(ctx, key)
				if err != nil {
					t.Fatalf("%v %s: %v", alg, key, err)
				}
				if res.Allowed != (i < 3) {
					t.Fatalf("%v %s request %d: allowed %v", alg, key, i, res.Allowed)
				}
			}
		}
	}
	var masters atomic.Int64 // ForEachMaster visits the masters concurrently
	c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		if n, _ := m.DBSize(ctx).Result(); n > 0 {
			masters.Add(1)
		}
		return nil
	})
	if masters.Load() != 3 {
		t.Errorf("keys on %d masters, want 3", masters.Load())
	}

	// Two limits on one key: one hash tag, one slot, one script.
	perSec, _ := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 2, Period: time.Second}, ratelimit.WithStore(s))
	perDay, _ := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 1000, Period: 24 * time.Hour}, ratelimit.WithStore(s))
	both, err := ratelimit.All(perSec, perDay)
	if err != nil {
		t.Fatal(err)
	}
	var got []bool
	for range 3 {
		res, err := both.Allow(ctx, "tenant:9", "tenant:9")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Allowed)
	}
	if fmt.Sprint(got) != "[true true false]" {
		t.Errorf("multi-policy on one key: %v", got)
	}
	if _, err := both.Allow(ctx, "ip:10.0.0.1", "tenant:9"); !errors.Is(err, redisstore.ErrCrossSlot) {
		t.Errorf("tiers over two keys without a common tag: err %v, want ErrCrossSlot", err)
	}

	// Tiers over several keys, tagged by tenant.
	tagged := newStore(t, c, redisstore.WithHashTag(func(key string) string {
		_, tenant, _ := strings.Cut(key, "|")
		return tenant
	}))
	perIP, _ := ratelimit.New(ratelimit.SlidingWindow, ratelimit.Limit{Rate: 2, Period: time.Hour}, ratelimit.WithStore(tagged))
	perTenant, _ := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 3, Period: time.Hour}, ratelimit.WithStore(tagged))
	tiers, err := ratelimit.All(perIP, perTenant)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, ip := range []string{"a", "a", "a", "b", "b"} {
		res, err := tiers.Allow(ctx, "ip:"+ip+"|acme", "tenant|acme")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Allowed)
	}
	// ip a: 2 of 3 (its third is refused without spending the tenant's);
	// ip b: its first takes the tenant's third unit, its second is refused.
	if fmt.Sprint(got) != "[true true false true false]" {
		t.Errorf("tiers on cluster: %v", got)
	}
}
