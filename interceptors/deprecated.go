package interceptors

// The former names of options renamed to the rule of docs/architecture.md
// (With<Kind><Setting>); kept for one release.

import (
	"context"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// ClientThrottle is the former name of WithClientThrottle.
//
// Deprecated: use WithClientThrottle; options are named With + the setting (docs/architecture.md).
func ClientThrottle(t *retry.Throttle[shed.Priority]) ClientOption { return WithClientThrottle(t) }

// ClientBudget is the former name of WithClientBudget.
//
// Deprecated: use WithClientBudget; options are named With + the setting (docs/architecture.md).
func ClientBudget(b *retry.Budget) ClientOption { return WithClientBudget(b) }

// ClientBackoff is the former name of WithClientBackoff.
//
// Deprecated: use WithClientBackoff; options are named With + the setting (docs/architecture.md).
func ClientBackoff(b retry.Backoff) ClientOption { return WithClientBackoff(b) }

// ClientMaxAttempts is the former name of WithClientMaxAttempts.
//
// Deprecated: use WithClientMaxAttempts; options are named With + the setting (docs/architecture.md).
func ClientMaxAttempts(n int) ClientOption { return WithClientMaxAttempts(n) }

// ClientMaxDelay is the former name of WithClientMaxDelay.
//
// Deprecated: use WithClientMaxDelay; options are named With + the setting (docs/architecture.md).
func ClientMaxDelay(d time.Duration) ClientOption { return WithClientMaxDelay(d) }

// ClientSeed is the former name of WithClientSeed.
//
// Deprecated: use WithClientSeed; options are named With + the setting (docs/architecture.md).
func ClientSeed(seed uint64) ClientOption { return WithClientSeed(seed) }

// ClientWait is the former name of WithClientWait.
//
// Deprecated: use WithClientWait; options are named With + the setting (docs/architecture.md).
func ClientWait(wait func(ctx context.Context, d time.Duration) error) ClientOption {
	return WithClientWait(wait)
}

// ClientClock is the former name of WithClientClock.
//
// Deprecated: use WithClientClock; options are named With + the setting (docs/architecture.md).
func ClientClock(clk clock.Clock) ClientOption { return WithClientClock(clk) }

// ClientRetryMethods is the former name of WithClientRetryMethods.
//
// Deprecated: use WithClientRetryMethods; options are named With + the setting (docs/architecture.md).
func ClientRetryMethods(methods ...string) ClientOption { return WithClientRetryMethods(methods...) }

// TrustProxies is the former name of WithIPTrustedProxies.
//
// Deprecated: use WithIPTrustedProxies; options are named With + the setting (docs/architecture.md).
func TrustProxies(cidrs ...string) IPOption { return WithIPTrustedProxies(cidrs...) }

// IPv6Prefix is the former name of WithIPv6Prefix.
//
// Deprecated: use WithIPv6Prefix; options are named With + the setting (docs/architecture.md).
func IPv6Prefix(bits int) IPOption { return WithIPv6Prefix(bits) }

// IPv4Prefix is the former name of WithIPv4Prefix.
//
// Deprecated: use WithIPv4Prefix; options are named With + the setting (docs/architecture.md).
func IPv4Prefix(bits int) IPOption { return WithIPv4Prefix(bits) }

// UseForwarded is the former name of WithIPForwarded.
//
// Deprecated: use WithIPForwarded; options are named With + the setting (docs/architecture.md).
func UseForwarded() IPOption { return WithIPForwarded() }
