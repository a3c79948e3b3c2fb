package interceptors

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
	"github.com/sluicehq/sluice/retry"
	"github.com/sluicehq/sluice/shed"
)

// The former option names still configure what the new ones do.
func TestDeprecatedOptionNames(t *testing.T) {
	ip, err := NewClientIP(TrustProxies("10.0.0.0/8"), IPv4Prefix(24), IPv6Prefix(64), UseForwarded())
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "10.1.2.3:5555"
	r.Header.Set("Forwarded", "for=203.0.113.77")
	if got, err := ip.HTTPKey(r); err != nil || got != "ip:203.0.113.0/24" {
		t.Errorf("key through a trusted proxy with the old names = %q, want ip:203.0.113.0/24 (err %v)", got, err)
	}
	if _, err := UnaryClientInterceptor(ClientMaxAttempts(0)); err == nil {
		t.Error("ClientMaxAttempts(0) accepted; WithClientMaxAttempts(0) is refused")
	}
	budget, err := retry.NewBudget(0.1, 10)
	if err != nil {
		t.Fatal(err)
	}
	wait := func(context.Context, time.Duration) error { return nil }
	if _, err := UnaryClientInterceptor(ClientBackoff(retry.Backoff{Base: time.Millisecond, Max: time.Second}),
		ClientBudget(budget), ClientClock(clock.System()), ClientMaxDelay(time.Second), ClientSeed(1), ClientThrottle(nil),
		ClientWait(wait), ClientRetryMethods("GET")); err != nil {
		t.Errorf("old client option names: %v", err)
	}
	if UserHash("u1") != shed.UserHash("u1") {
		t.Error("interceptors.UserHash differs from shed.UserHash")
	}
}
