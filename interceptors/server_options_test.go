package interceptors

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/clock"
)

// Each option's type lets it into exactly the constructors its scope says
// it applies to: the compile-time check and the run-time one agree, for
// every server option.
func TestServerOptionTypesMatchScopes(t *testing.T) {
	constructors := []struct {
		name  string
		scope srvScope
		iface reflect.Type
	}{
		{"RateLimitMiddleware", srvHTTP | srvRate, reflect.TypeFor[RateLimitMiddlewareOption]()},
		{"GateMiddleware", srvHTTP | srvGate, reflect.TypeFor[GateMiddlewareOption]()},
		{"ShedMiddleware", srvHTTP | srvShedder, reflect.TypeFor[ShedMiddlewareOption]()},
		{"RateLimitInterceptors", srvGRPC | srvRate, reflect.TypeFor[RateLimitInterceptorsOption]()},
		{"GateInterceptors", srvGRPC | srvGate, reflect.TypeFor[GateInterceptorsOption]()},
		{"ShedInterceptors", srvGRPC | srvShedder, reflect.TypeFor[ShedInterceptorsOption]()},
	}
	options := []any{
		WithRetryJitter(time.Millisecond),
		WithJitterSource(func() float64 { return 0 }),
		WithStoreErrorRetry(time.Second),
		WithFailOpen(true),
		WithLegacyHeaders(true),
		WithClock(clock.System()),
		WithOverloadRetry(time.Second),
		WithGRPCClassifier(DefaultGRPCClassifier),
		WithHTTPClassifier(DefaultHTTPClassifier),
		WithGRPCPriority(MetadataPriority),
		WithHTTPPriority(HeaderPriority),
		WithGRPCUser(nil),
		WithHTTPUser(func(*http.Request) uint64 { return 0 }),
	}
	for _, o := range options {
		v := reflect.ValueOf(o)
		so := v.Convert(reflect.TypeFor[ServerOption]()).Interface().(ServerOption)
		for _, c := range constructors {
			applies := so.scope&c.scope&srvAnyTransport != 0 && so.scope&c.scope&srvAnyGuard != 0
			if got := v.Type().Implements(c.iface); got != applies {
				t.Errorf("%s (%s) accepted by %s: %v, but its scope says %v", so.name, v.Type().Name(), c.name, got, applies)
			}
		}
	}
}
