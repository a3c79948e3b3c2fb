package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sluicehq/sluice/metrics"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/ratelimit/redisstore"
)

// A GCRA limit of 5 per minute shared by every process that uses the same
// Redis. Each decision is one script run on the server, at the server's time.
// ContextTimeoutEnabled lets the store bound each call by its timeout
// (100ms by default; a second here, where the examples share a busy test
// machine).
func Example() {
	// REDIS_ADDR is your Redis's address; unset, go-redis dials localhost:6379.
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("example:"), redisstore.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Minute}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := range 6 {
		res, err := lim.Allow(ctx, "api-key:alice")
		if err != nil {
			panic(err)
		}
		fmt.Println(i, res.Allowed, res.Remaining, res.RetryAfter > 0)
	}
	// Output:
	// 0 true 4 false
	// 1 true 3 false
	// 2 true 2 false
	// 3 true 1 false
	// 4 true 0 false
	// 5 false 0 true
}

// Several limits on one key — 3 a minute and 1000 a day — are checked in
// one round trip, all or nothing: a request the daily limit refused would
// not spend the per-second one.
func Example_multiPolicy() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("example-multi:"), redisstore.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	perMinute, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 3, Period: time.Minute}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	perDay, err := ratelimit.New(ratelimit.FixedWindow, ratelimit.Limit{Rate: 1000, Period: 24 * time.Hour}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	both, err := ratelimit.All(perMinute, perDay)
	if err != nil {
		panic(err)
	}
	each := make([]ratelimit.Result, 2)
	for range 4 {
		res, err := both.AllowN(context.Background(), []string{"user:7", "user:7"}, 1, each)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Allowed, each[0].Remaining, each[1].Remaining)
	}
	// Output:
	// true 2 999
	// true 1 998
	// true 0 997
	// false 0 997
}

// When Redis is unreachable the store decides by its failure policy: a
// decision, so the error is nil and the Result says who decided; the store
// keeps the cause.
func Example_failOpen() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true}) // nothing listens there
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithFailurePolicy(redisstore.FailOpen))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Second}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	res, err := lim.Allow(context.Background(), "k")
	if err != nil || !res.Allowed { // the usual idiom: it does not defeat FailOpen
		fmt.Println("refused")
		return
	}
	fmt.Println(res.Allowed, res.Source, res.Degraded(), errors.Is(store.LastError(), ratelimit.ErrDegraded))
	// Output: true fail_open true true
}

// A per-key concurrency limit across processes: at most 2 requests of a
// tenant in flight; a lease expires if its holder never releases it.
func ExampleConcurrency() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("example-cc:"), redisstore.WithTimeout(time.Second))
	if err != nil {
		panic(err)
	}
	cc, err := redisstore.NewConcurrency(store, 2, 30*time.Second)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	a, res, _ := cc.Acquire(ctx, "tenant:acme")
	fmt.Println(res.Allowed, res.Remaining)
	_, res, _ = cc.Acquire(ctx, "tenant:acme")
	fmt.Println(res.Allowed, res.Remaining)
	_, res, _ = cc.Acquire(ctx, "tenant:acme")
	fmt.Println(res.Allowed)
	a.Release(ctx)
	_, res, _ = cc.Acquire(ctx, "tenant:acme")
	fmt.Println(res.Allowed)
	// Output:
	// true 1
	// true 0
	// false
	// true
}

// Tiers over several keys (one per IP, one per tenant) are one batch, which
// Redis Cluster can only run if the keys share a slot: WithHashTag gives
// every key of a tenant the tenant's tag. Here a key is "ip|tenant" or
// "tenant".
func ExampleWithHashTag() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("example-tag:"), redisstore.WithTimeout(time.Second),
		redisstore.WithHashTag(func(key string) string {
			if _, tenant, ok := strings.Cut(key, "|"); ok {
				return tenant
			}
			return key
		}))
	if err != nil {
		panic(err)
	}
	perIP, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 2, Period: time.Minute}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	perTenant, err := ratelimit.New(ratelimit.TokenBucket, ratelimit.Limit{Rate: 3, Period: time.Minute}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	tiers, err := ratelimit.All(perIP, perTenant)
	if err != nil {
		panic(err)
	}
	for _, ip := range []string{"10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"} {
		res, err := tiers.Allow(context.Background(), ip+"|acme", "acme")
		if err != nil {
			panic(err)
		}
		fmt.Println(ip, res.Allowed)
	}
	// Output:
	// 10.0.0.1 true
	// 10.0.0.1 true
	// 10.0.0.1 false
	// 10.0.0.2 true
	// 10.0.0.2 false
}

// callPrinter is a metrics.StoreObserver that prints what it hears;
// metrics/prom and metrics/gometrics turn the same events into a latency
// histogram and error and degraded-decision counters.
type callPrinter struct{}

func (callPrinter) StoreCall(op string, o metrics.StoreOutcome, _ time.Duration) {
	fmt.Println("call:", op, o)
}

func (callPrinter) StoreDegraded(policy string, cause metrics.StoreOutcome, n int) {
	fmt.Println("degraded:", policy, cause, n)
}

// The store reports each call to Redis, with its duration and outcome, and
// each decision its failure policy made.
func ExampleWithObserver() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("example-observer:"), redisstore.WithTimeout(time.Second),
		redisstore.WithObserver(callPrinter{}))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Minute}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	if _, err := lim.Allow(context.Background(), "api-key:bob"); err != nil {
		panic(err)
	}
	// Output:
	// call: decide ok
}

// Upgrading from a version that kept the state as text, while its
// processes still decide on the same Redis: roll out with LegacyShare, so
// that old and new processes count as one limit; once no old process is
// left, roll out again without the option (LegacyCarry, which carries each
// key's state over into the binary format the first time it decides it).
// Here the text state an old process left (about 3 of 5 spent) is shared.
func ExampleWithLegacyState() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer client.Close()
	ctx := context.Background()
	// What an old process wrote: GCRA's "tat fraction", in µs, under the
	// key name without the "2".
	tat := time.Now().Add(3*12*time.Second - 500*time.Millisecond).UnixMicro()
	if err := client.Set(ctx, "example-upgrade:{alice}:gcra:5:60000000:5", fmt.Sprint(tat, " 0"), time.Minute).Err(); err != nil {
		panic(err)
	}
	store, err := redisstore.New(client, redisstore.WithPrefix("example-upgrade:"), redisstore.WithTimeout(time.Second),
		redisstore.WithLegacyState(redisstore.LegacyShare))
	if err != nil {
		panic(err)
	}
	lim, err := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 5, Period: time.Minute}, ratelimit.WithStore(store))
	if err != nil {
		panic(err)
	}
	res, err := lim.Allow(ctx, "alice")
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Allowed, res.Remaining)
	// Output:
	// true 1
}
