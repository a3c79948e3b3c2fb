package interceptors

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sluicehq/sluice/shed"
)

func TestKeyClientIPResolve(t *testing.T) {
	trusted, err := NewClientIP(WithIPTrustedProxies("10.0.0.0/8", "2001:db8:ffff::/48", "192.0.2.7"))
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := NewClientIP(WithIPTrustedProxies("10.0.0.0/8"), WithIPForwarded())
	if err != nil {
		t.Fatal(err)
	}
	none, err := NewClientIP()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *ClientIP
		peer string
		hdr  []string
		want string // address, or "bad", "none"
	}{
		{"no proxies: header ignored", none, "203.0.113.9", []string{"1.2.3.4"}, "203.0.113.9"},
		{"untrusted peer: header ignored", trusted, "203.0.113.9", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer, no header", trusted, "10.1.1.1", nil, "10.1.1.1"},
		{"one hop", trusted, "10.1.1.1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"spoofed left part skipped", trusted, "10.1.1.1", []string{"6.6.6.6, 198.51.100.1, 10.2.2.2"}, "198.51.100.1"},
		{"single trusted address", trusted, "10.1.1.1", []string{"198.51.100.1, 192.0.2.7"}, "198.51.100.1"},
		{"several lines", trusted, "10.1.1.1", []string{"6.6.6.6", "198.51.100.1", "10.3.3.3"}, "198.51.100.1"},
		{"all trusted: leftmost", trusted, "10.1.1.1", []string{"10.9.9.9, 10.2.2.2"}, "10.9.9.9"},
		{"garbage left of the client is not read", trusted, "10.1.1.1", []string{"not-an-ip, 198.51.100.1"}, "198.51.100.1"},
		{"garbage where the client should be", trusted, "10.1.1.1", []string{"198.51.100.1, junk"}, "bad"},
		{"port and brackets", trusted, "10.1.1.1", []string{"[2001:db8::1]:443"}, "2001:db8::1"},
		{"v4 with port", trusted, "10.1.1.1", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"empty elements", trusted, "10.1.1.1", []string{" , 198.51.100.1 ,, "}, "198.51.100.1"},
		{"mapped peer", trusted, "::ffff:10.1.1.1", []string{"198.51.100.1"}, "198.51.100.1"},
		{"v6 trusted proxy", trusted, "2001:db8:ffff::1", []string{"2001:db8:1:2::3"}, "2001:db8:1:2::3"},
		{"zone stripped", none, "fe80::1%eth0", nil, "fe80::1"},
		{"too many hops", trusted, "10.1.1.1", []string{strings.Repeat("10.0.0.1,", MaxForwardedHops) + "10.0.0.1"}, "bad"},
		{"too long", trusted, "10.1.1.1", []string{strings.Repeat(" ", MaxForwardedLen) + "1.2.3.4"}, "bad"},
		{"forwarded", fwd, "10.1.1.1", []string{`for=6.6.6.6, for=198.51.100.1;proto=https, for="10.2.2.2:80"`}, "198.51.100.1"},
		{"forwarded v6", fwd, "10.1.1.1", []string{`For="[2001:db8::7]:4711"`}, "2001:db8::7"},
		{"forwarded unknown stops at proxy", fwd, "10.1.1.1", []string{`for=unknown, for=10.2.2.2`}, "10.2.2.2"},
		{"forwarded obfuscated", fwd, "10.1.1.1", []string{`for=_hidden`}, "10.1.1.1"},
		{"forwarded unterminated", fwd, "10.1.1.1", []string{`for="1.2.3.4`}, "bad"},
		{"forwarded no equals", fwd, "10.1.1.1", []string{`for`}, "bad"},
		{"forwarded ignores xff", fwd, "10.1.1.1", nil, "10.1.1.1"},
		{"invalid peer", none, "", nil, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p netip.Addr
			if tc.peer != "" {
				p = netip.MustParseAddr(tc.peer)
			}
			got, err := tc.c.Resolve(p, tc.hdr)
			switch tc.want {
			case "bad":
				if !errors.Is(err, ErrBadKey) {
					t.Fatalf("got %v, %v; want ErrBadKey", got, err)
				}
			case "none":
				if !errors.Is(err, ErrNoKey) {
					t.Fatalf("got %v, %v; want ErrNoKey", got, err)
				}
			default:
				if err != nil || got.String() != tc.want {
					t.Fatalf("got %v, %v; want %s", got, err, tc.want)
				}
			}
		})
	}
}

func TestKeyClientIPKey(t *testing.T) {
	def, err := NewClientIP()
	if err != nil {
		t.Fatal(err)
	}
	wide, err := NewClientIP(WithIPv4Prefix(24), WithIPv6Prefix(48))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c    *ClientIP
		addr string
		want string
	}{
		{def, "198.51.100.7", "ip:198.51.100.7"},
		{def, "2001:db8:1:2:3:4:5:6", "ip:2001:db8:1:2::/64"},
		{def, "2001:db8:1:2:ffff::1", "ip:2001:db8:1:2::/64"},
		{def, "::ffff:198.51.100.7", "ip:198.51.100.7"},
		{wide, "198.51.100.7", "ip:198.51.100.0/24"},
		{wide, "2001:db8:1:2::1", "ip:2001:db8:1::/48"},
	} {
		if got := tc.c.Key(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Key(%s) = %q, want %q", tc.addr, got, tc.want)
		}
	}
	for _, opts := range [][]IPOption{
		{WithIPTrustedProxies("10.0.0.0/33")},
		{WithIPTrustedProxies("nonsense")},
		{WithIPTrustedProxies("::ffff:0:0/90")},
		{WithIPv6Prefix(0)},
		{WithIPv6Prefix(129)},
		{WithIPv4Prefix(33)},
		{{}},
	} {
		if _, err := NewClientIP(opts...); err == nil {
			t.Errorf("NewClientIP(%v): no error", opts)
		}
	}
	// A mapped trusted prefix is the IPv4 prefix it maps.
	c, err := NewClientIP(WithIPTrustedProxies("::ffff:10.0.0.0/104"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Resolve(netip.MustParseAddr("10.9.9.9"), []string{"1.2.3.4"}); got.String() != "1.2.3.4" {
		t.Errorf("mapped trusted prefix: %v", got)
	}
}

func TestKeyClientIPRequestAndPeer(t *testing.T) {
	c, err := NewClientIP(WithIPTrustedProxies("127.0.0.0/8", "::1"))
	if err != nil {
		t.Fatal(err)
	}
	// Through a real server: the peer is the loopback client, trusted.
	srv := srvServe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := c.HTTPKey(r)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		_, _ = w.Write([]byte(k))
	}))
	if _, body := srvGet(t, srv.URL, "X-Forwarded-For", "198.51.100.1"); string(body) != "ip:198.51.100.1" {
		t.Errorf("HTTP key %q", body)
	}
	if _, body := srvGet(t, srv.URL); string(body) != "ip:127.0.0.1" {
		t.Errorf("HTTP key without header %q", body)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "not an address"
	if _, err := c.HTTPKey(r); !errors.Is(err, ErrNoKey) {
		t.Errorf("bad RemoteAddr: %v", err)
	}

	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 4000}})
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-forwarded-for", "2001:db8:9:9::1"))
	if k, err := c.GRPCKey(ctx, "/s/m"); err != nil || k != "ip:2001:db8:9:9::/64" {
		t.Errorf("gRPC key %q, %v", k, err)
	}
	unix := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.UnixAddr{Name: "/tmp/s", Net: "unix"}})
	if _, err := c.GRPCKey(unix, "/s/m"); !errors.Is(err, ErrNoKey) {
		t.Errorf("unix peer: %v", err)
	}
	if _, err := c.GRPCKey(context.Background(), "/s/m"); !errors.Is(err, ErrNoKey) {
		t.Errorf("no peer: %v", err)
	}
}

func TestKeyHeaderAndMetadata(t *testing.T) {
	hk, err := HeaderKey("x-tenant")
	if err != nil {
		t.Fatal(err)
	}
	ak, err := APIKey("Authorization")
	if err != nil {
		t.Fatal(err)
	}
	req := func(kv ...string) *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		for i := 0; i+1 < len(kv); i += 2 {
			r.Header.Add(kv[i], kv[i+1])
		}
		return r
	}
	for _, tc := range []struct {
		f    HTTPKeyFunc
		r    *http.Request
		want string
		err  error
	}{
		{hk, req("X-Tenant", " acme "), "h:X-Tenant:acme", nil},
		{hk, req(), "", ErrNoKey},
		{hk, req("X-Tenant", ""), "", ErrNoKey},
		{hk, req("X-Tenant", "a", "X-Tenant", "b"), "", ErrBadKey},
		{hk, req("X-Tenant", strings.Repeat("a", MaxKeyValueLen+1)), "", ErrBadKey},
		{hk, req("X-Tenant", "a b"), "", ErrBadKey},
		{ak, req("Authorization", "Bearer tok"), "apikey:…", nil},
		{ak, req("Authorization", "bearer   tok"), "apikey:…", nil},
		{ak, req("Authorization", "tok"), "apikey:…", nil},
		{ak, req("Authorization", "Bearer"), "", ErrNoKey},
		{ak, req("Authorization", "Bearertok"), "apikey:…", nil},
	} {
		got, err := tc.f(tc.r)
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) {
			t.Errorf("%v: err %v, want %v", tc.r.Header, err, tc.err)
			continue
		}
		if tc.err == nil && !strings.HasPrefix(got, "apikey:") && got != tc.want {
			t.Errorf("%v: key %q, want %q", tc.r.Header, got, tc.want)
		}
		if tc.err == nil && strings.HasPrefix(got, "apikey:") && (len(got) != 39 || strings.Contains(got, "tok")) {
			t.Errorf("%v: API key %q not a hash", tc.r.Header, got)
		}
	}
	// The same token gives the same key with or without the scheme.
	a, _ := ak(req("Authorization", "Bearer tok"))
	b, _ := ak(req("Authorization", "tok"))
	c, _ := ak(req("Authorization", "Bearer tok2"))
	if a != b || a == c {
		t.Errorf("API keys %q %q %q", a, b, c)
	}

	mk, err := MetadataKey("Tenant")
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("tenant", "acme"))
	if k, err := mk(ctx, "/s/m"); err != nil || k != "md:tenant:acme" {
		t.Errorf("metadata key %q %v", k, err)
	}
	mak, err := MetadataAPIKey("authorization")
	if err != nil {
		t.Fatal(err)
	}
	ctx = metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer tok"))
	if k, err := mak(ctx, "/s/m"); err != nil || k != a {
		t.Errorf("metadata API key %q %v, want %q", k, err, a)
	}
	for _, name := range []string{"", "a b", "x\n"} {
		if _, err := HeaderKey(name); err == nil {
			t.Errorf("HeaderKey(%q): no error", name)
		}
		if _, err := APIKey(name); err == nil {
			t.Errorf("APIKey(%q): no error", name)
		}
		if _, err := MetadataAPIKey(name); err == nil {
			t.Errorf("MetadataAPIKey(%q): no error", name)
		}
	}
	if _, err := MetadataKey("token-bin"); err == nil {
		t.Error("MetadataKey of a binary key: no error")
	}
}

type srvUserCtxKey struct{}

func srvUserFrom(ctx context.Context) (string, bool) {
	u, ok := ctx.Value(srvUserCtxKey{}).(string)
	return u, ok
}

func TestKeyUserAndFirst(t *testing.T) {
	uk, err := UserKey(srvUserFrom)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := NewClientIP()
	if err != nil {
		t.Fatal(err)
	}
	first, err := FirstHTTPKey(uk, ip.HTTPKey)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil) // RemoteAddr 192.0.2.1:1234
	if k, err := first(r); err != nil || k != "ip:192.0.2.1" {
		t.Errorf("anonymous: %q %v", k, err)
	}
	r = r.WithContext(context.WithValue(r.Context(), srvUserCtxKey{}, "alice"))
	if k, err := first(r); err != nil || k != "user:alice" {
		t.Errorf("alice: %q %v", k, err)
	}
	r = r.WithContext(context.WithValue(r.Context(), srvUserCtxKey{}, strings.Repeat("a", 300)))
	if _, err := first(r); !errors.Is(err, ErrBadKey) {
		t.Errorf("long user: %v (a bad key must not fall through)", err)
	}

	guk, err := GRPCUserKey(srvUserFrom)
	if err != nil {
		t.Fatal(err)
	}
	gfirst, err := FirstGRPCKey(guk, MethodKey)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := gfirst(context.Background(), "/s/m"); err != nil || k != "/s/m" {
		t.Errorf("gRPC anonymous: %q %v", k, err)
	}
	if k, err := gfirst(context.WithValue(context.Background(), srvUserCtxKey{}, "bob"), "/s/m"); err != nil || k != "user:bob" {
		t.Errorf("gRPC bob: %q %v", k, err)
	}
	if _, err := FirstGRPCKey(guk); err != nil {
		t.Error(err)
	}
	nothing, _ := FirstGRPCKey(guk)
	if _, err := nothing(context.Background(), ""); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key at all: %v", err)
	}
	for name, err := range map[string]error{
		"UserKey(nil)":      func() error { _, err := UserKey(nil); return err }(),
		"GRPCUserKey(nil)":  func() error { _, err := GRPCUserKey(nil); return err }(),
		"FirstHTTPKey()":    func() error { _, err := FirstHTTPKey(); return err }(),
		"FirstHTTPKey(nil)": func() error { _, err := FirstHTTPKey(nil); return err }(),
		"FirstGRPCKey()":    func() error { _, err := FirstGRPCKey(); return err }(),
		"FirstGRPCKey(nil)": func() error { _, err := FirstGRPCKey(nil); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestServerPriorityExtractors(t *testing.T) {
	for _, tc := range []struct {
		vals []string
		want shed.Priority
	}{
		{nil, shed.Critical},
		{[]string{"sheddable"}, shed.Sheddable},
		{[]string{" CRITICAL_PLUS "}, shed.CriticalPlus},
		{[]string{"3"}, shed.Sheddable},
		{[]string{"bogus"}, shed.Critical},
		{[]string{strings.Repeat("x", 1000)}, shed.Critical},
		{[]string{"sheddable", "critical"}, shed.Critical},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		md := metadata.MD{}
		for _, v := range tc.vals {
			r.Header.Add(PriorityHeader, v)
			md.Append(PriorityMetadataKey, v)
		}
		if got := HeaderPriority(r); got != tc.want {
			t.Errorf("header %q: %v, want %v", tc.vals, got, tc.want)
		}
		if got := MetadataPriority(metadata.NewIncomingContext(context.Background(), md), "/s/m"); got != tc.want {
			t.Errorf("metadata %q: %v, want %v", tc.vals, got, tc.want)
		}
	}
}

// FuzzKeyClientIP feeds arbitrary peers and forwarding headers (both
// syntaxes) to ClientIP: it must never panic, must answer with an address
// or one of the two key errors, must never answer with a forwarded address
// when the peer is not trusted, and its key must be short, valid UTF-8.
func FuzzKeyClientIP(f *testing.F) {
	for _, s := range []string{
		"198.51.100.1", "6.6.6.6, 198.51.100.1, 10.2.2.2", "[2001:db8::1]:443", " , ,",
		`for=198.51.100.1;proto=https, for="[2001:db8::7]:4711"`, `for="\"`, `for=unknown`, `for=_x`,
		strings.Repeat("10.0.0.1,", 70), "fe80::1%eth0", "::ffff:1.2.3.4",
	} {
		f.Add("10.1.1.1:5000", s, false)
		f.Add("10.1.1.1:5000", s, true)
		f.Add("203.0.113.1:80", s, false)
	}
	xff, err := NewClientIP(WithIPTrustedProxies("10.0.0.0/8", "2001:db8::/32"))
	if err != nil {
		f.Fatal(err)
	}
	fwd, err := NewClientIP(WithIPTrustedProxies("10.0.0.0/8", "2001:db8::/32"), WithIPForwarded())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, remote, header string, forwarded bool) {
		c, name := xff, "X-Forwarded-For"
		if forwarded {
			c, name = fwd, "Forwarded"
		}
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		for _, line := range strings.Split(header, "\n") {
			r.Header.Add(name, line)
		}
		a, err := c.FromRequest(r)
		if err != nil {
			if !errors.Is(err, ErrNoKey) && !errors.Is(err, ErrBadKey) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("address %v is not a plain address", a)
		}
		p, ok := srvParseHop(remote)
		if ok && !c.isTrusted(p) && a != p {
			t.Fatalf("untrusted peer %v, but answered %v from the header", p, a)
		}
		k := c.Key(a)
		if len(k) > 64 || !utf8.ValidString(k) || !strings.HasPrefix(k, "ip:") {
			t.Fatalf("key %q", k)
		}
	})
}

// FuzzKeyHeaders feeds arbitrary values to the header, API key and priority
// extractors: they must never panic, and every key they return must be
// bounded, printable ASCII, and free of the raw API key.
func FuzzKeyHeaders(f *testing.F) {
	for _, s := range []string{"acme", "Bearer tok", "bearer", "Bearer  ", "a b", "\x00", strings.Repeat("k", 2000), "critical", "3"} {
		f.Add(s, s)
	}
	hk, err := HeaderKey("X-Tenant")
	if err != nil {
		f.Fatal(err)
	}
	ak, err := APIKey("Authorization")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, v1, v2 string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["X-Tenant"] = []string{v1}
		r.Header["Authorization"] = []string{v2}
		r.Header[PriorityHeader] = []string{v1}
		for _, f := range []HTTPKeyFunc{hk, ak} {
			k, err := f(r)
			if err != nil {
				if !errors.Is(err, ErrNoKey) && !errors.Is(err, ErrBadKey) {
					t.Fatalf("unexpected error %v", err)
				}
				continue
			}
			if len(k) > MaxKeyValueLen+32 || k == "" {
				t.Fatalf("key of length %d", len(k))
			}
			for i := 0; i < len(k); i++ {
				if k[i] <= 0x20 || k[i] >= 0x7f {
					t.Fatalf("key %q has a byte outside visible ASCII", k)
				}
			}
		}
		if k, err := ak(r); err == nil && len(v2) >= 8 && strings.Contains(k, v2) {
			t.Fatalf("API key %q leaks the token", k)
		}
		if p := HeaderPriority(r); p >= shed.Priorities {
			t.Fatalf("priority %v", p)
		}
	})
}
