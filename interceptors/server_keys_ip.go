package interceptors

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// Bounds of the forwarding headers ClientIP reads from trusted proxies.
const (
	// MaxForwardedLen is the most bytes of X-Forwarded-For (or Forwarded),
	// over all its lines, that ClientIP reads; more is ErrBadKey.
	MaxForwardedLen = 4096
	// MaxForwardedHops is the most elements of X-Forwarded-For (or
	// Forwarded) that ClientIP reads; more is ErrBadKey.
	MaxForwardedHops = 64
)

// ClientIP finds the address of the client behind a request, for keying
// rate limits per IP, and groups IPv6 clients by prefix.
//
// The address is the direct peer's (RemoteAddr, or the gRPC peer), unless
// the peer is a trusted proxy (WithIPTrustedProxies): only then is X-Forwarded-For
// (or, with WithIPForwarded, the RFC 7239 Forwarded field) read, from right to
// left, skipping the hops that are themselves trusted proxies; the first
// untrusted hop is the client. If every hop is trusted, the leftmost is the
// client. A forwarding header from an untrusted peer is ignored entirely,
// since anyone can write one. Forwarding headers are bounded
// (MaxForwardedLen, MaxForwardedHops); a hop that must be read and is not an
// IP address is ErrBadKey, except Forwarded's "unknown" and obfuscated
// identifiers (and elements without "for"), which end the walk at the proxy
// that wrote them.
//
// The key is "ip:" and the client's address, or its prefix: IPv4 addresses
// are keyed whole by default, IPv6 addresses by their /64 (one customer's
// network), so a client cannot mint fresh allowances by hopping addresses
// within its prefix. A ClientIP is immutable and safe for concurrent use.
type ClientIP struct {
	trusted   []netip.Prefix
	v4, v6    int
	forwarded bool
}

// IPOption configures a ClientIP.
type IPOption struct {
	name  string
	apply func(*ClientIP) error
}

// WithIPTrustedProxies sets the proxies whose forwarding headers are believed:
// CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single addresses.
// The default trusts nobody: forwarding headers are ignored.
func WithIPTrustedProxies(cidrs ...string) IPOption {
	return IPOption{"WithIPTrustedProxies", func(c *ClientIP) error {
		var errs []error
		for _, s := range cidrs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				a, err2 := netip.ParseAddr(s)
				if err2 != nil {
					errs = append(errs, fmt.Errorf("%q is neither a CIDR prefix nor an address", s))
					continue
				}
				a = a.Unmap().WithZone("")
				p = netip.PrefixFrom(a, a.BitLen())
			}
			if p.Addr().Is4In6() {
				bits := p.Bits() - 96
				if bits < 0 {
					errs = append(errs, fmt.Errorf("%q: an IPv4-mapped prefix shorter than /96", s))
					continue
				}
				p = netip.PrefixFrom(p.Addr().Unmap(), bits)
			}
			c.trusted = append(c.trusted, p.Masked())
		}
		return errors.Join(errs...)
	}}
}

// WithIPv6Prefix sets the prefix length by which IPv6 clients are grouped
// (default 64; 1 to 128, 128 keys each address).
func WithIPv6Prefix(bits int) IPOption {
	return IPOption{"WithIPv6Prefix", func(c *ClientIP) error {
		if bits < 1 || bits > 128 {
			return fmt.Errorf("prefix length %d not in [1, 128]", bits)
		}
		c.v6 = bits
		return nil
	}}
}

// WithIPv4Prefix sets the prefix length by which IPv4 clients are grouped
// (default 32, each address; 1 to 32).
func WithIPv4Prefix(bits int) IPOption {
	return IPOption{"WithIPv4Prefix", func(c *ClientIP) error {
		if bits < 1 || bits > 32 {
			return fmt.Errorf("prefix length %d not in [1, 32]", bits)
		}
		c.v4 = bits
		return nil
	}}
}

// WithIPForwarded makes trusted proxies' RFC 7239 Forwarded field ("for="
// parameters) the source of the client address instead of X-Forwarded-For.
// Only one of the two is ever read: a proxy chain should write one.
func WithIPForwarded() IPOption {
	return IPOption{"WithIPForwarded", func(c *ClientIP) error {
		c.forwarded = true
		return nil
	}}
}

// NewClientIP returns a ClientIP configured by opts, or an error naming
// every invalid option.
func NewClientIP(opts ...IPOption) (*ClientIP, error) {
	c := &ClientIP{v4: 32, v6: 64}
	var errs []error
	for _, o := range opts {
		if o.apply == nil {
			errs = append(errs, errors.New("sluice/interceptors: NewClientIP: zero IPOption"))
			continue
		}
		if err := o.apply(c); err != nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: NewClientIP: %s: %w", o.name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return c, nil
}

// isTrusted reports whether a is one of the trusted proxies.
func (c *ClientIP) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Resolve returns the client address of a request that came from peer and
// carries the forwarding header lines fwd (X-Forwarded-For, or Forwarded
// with WithIPForwarded), by the rules of the type's doc. The result is never
// an IPv4-mapped IPv6 address and carries no zone.
func (c *ClientIP) Resolve(peerAddr netip.Addr, fwd []string) (netip.Addr, error) {
	if !peerAddr.IsValid() {
		return netip.Addr{}, ErrNoKey
	}
	client := peerAddr.Unmap().WithZone("")
	if len(c.trusted) == 0 || len(fwd) == 0 || !c.isTrusted(client) {
		return client, nil
	}
	var hops [MaxForwardedHops]string
	n, err := srvSplitForwarded(fwd, c.forwarded, &hops)
	if err != nil {
		return netip.Addr{}, err
	}
	for i := n - 1; i >= 0; i-- {
		h := hops[i]
		if c.forwarded && (h == "" || h == "unknown" || strings.HasPrefix(h, "_")) {
			return client, nil // the proxy that wrote it could not tell
		}
		a, ok := srvParseHop(h)
		if !ok {
			return netip.Addr{}, ErrBadKey
		}
		client = a
		if !c.isTrusted(a) {
			return client, nil
		}
	}
	return client, nil
}

// srvSplitForwarded splits the forwarding header lines into hops, left to
// right, without copying: the elements of X-Forwarded-For, or the "for"
// values of Forwarded (unquoted; an element without "for" is an empty hop).
func srvSplitForwarded(lines []string, forwarded bool, hops *[MaxForwardedHops]string) (int, error) {
	total, n := 0, 0
	for _, line := range lines {
		total += len(line)
		if total > MaxForwardedLen {
			return 0, ErrBadKey
		}
		if forwarded {
			var err error
			if n, err = srvSplitForwardedLine(line, hops, n); err != nil {
				return 0, err
			}
			continue
		}
		for line != "" {
			el := line
			if i := strings.IndexByte(line, ','); i >= 0 {
				el, line = line[:i], line[i+1:]
			} else {
				line = ""
			}
			el = strings.Trim(el, " \t")
			if el == "" {
				continue // empty list elements are allowed and mean nothing
			}
			if n == len(hops) {
				return 0, ErrBadKey
			}
			hops[n] = el
			n++
		}
	}
	return n, nil
}

// srvSplitForwardedLine parses one Forwarded line (RFC 7239 §4):
// elements separated by commas, pairs by semicolons, values tokens or
// quoted strings. It appends each element's "for" value to hops.
func srvSplitForwardedLine(s string, hops *[MaxForwardedHops]string, n int) (int, error) {
	i := 0
	forVal, inElement := "", false
	flush := func() error {
		if !inElement {
			return nil
		}
		if n == len(hops) {
			return ErrBadKey
		}
		hops[n] = forVal
		n++
		forVal, inElement = "", false
		return nil
	}
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', ';':
			i++
			continue
		case ',':
			if err := flush(); err != nil {
				return 0, err
			}
			i++
			continue
		}
		// a pair: token "=" value
		j := i
		for j < len(s) && s[j] != '=' && s[j] != ';' && s[j] != ',' {
			j++
		}
		if j == len(s) || s[j] != '=' {
			return 0, ErrBadKey
		}
		name := strings.TrimRight(s[i:j], " \t")
		j++
		var val string
		if j < len(s) && s[j] == '"' {
			k := j + 1
			var b strings.Builder
			escaped := false
			for ; k < len(s); k++ {
				ch := s[k]
				if ch == '\\' && !escaped {
					escaped = true
					continue
				}
				if ch == '"' && !escaped {
					break
				}
				escaped = false
				b.WriteByte(ch)
			}
			if k == len(s) {
				return 0, ErrBadKey // unterminated quoted string
			}
			val = b.String()
			j = k + 1
		} else {
			k := j
			for k < len(s) && s[k] != ';' && s[k] != ',' && s[k] != ' ' && s[k] != '\t' {
				k++
			}
			val = s[j:k]
			j = k
		}
		inElement = true
		if strings.EqualFold(name, "for") {
			forVal = val
		}
		i = j
	}
	if err := flush(); err != nil {
		return 0, err
	}
	return n, nil
}

// srvParseHop reads one hop: an address, an address with a port, or a
// bracketed IPv6 address with or without a port.
func srvParseHop(h string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if len(h) > 2 && h[0] == '[' && h[len(h)-1] == ']' {
		if a, err := netip.ParseAddr(h[1 : len(h)-1]); err == nil && a.Is6() {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// Key returns the rate-limit key of address a: "ip:" and the address,
// or its prefix when the configured prefix length is shorter than the
// address.
func (c *ClientIP) Key(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	bits := c.v6
	if a.Is4() {
		bits = c.v4
	}
	if bits >= a.BitLen() {
		return "ip:" + a.String()
	}
	p, _ := a.Prefix(bits)
	return "ip:" + p.String()
}

// FromRequest returns the client address of an HTTP request (see Resolve).
// A RemoteAddr that is not an address, with or without a port, is ErrNoKey.
func (c *ClientIP) FromRequest(r *http.Request) (netip.Addr, error) {
	peerAddr, ok := srvParseHop(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, ErrNoKey
	}
	name := "X-Forwarded-For"
	if c.forwarded {
		name = "Forwarded"
	}
	return c.Resolve(peerAddr, r.Header.Values(name))
}

// HTTPKey is an HTTPKeyFunc: the key of the request's client address.
func (c *ClientIP) HTTPKey(r *http.Request) (string, error) {
	a, err := c.FromRequest(r)
	if err != nil {
		return "", err
	}
	return c.Key(a), nil
}

// FromContext returns the client address of an RPC: its peer's address
// (see Resolve), with the forwarding header read from the incoming metadata
// ("x-forwarded-for", or "forwarded"). A peer that is not an IP endpoint
// (a Unix socket, an in-memory pipe) is ErrNoKey.
func (c *ClientIP) FromContext(ctx context.Context) (netip.Addr, error) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}, ErrNoKey
	}
	var peerAddr netip.Addr
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		peerAddr = a.AddrPort().Addr()
	default:
		peerAddr, ok = srvParseHop(p.Addr.String())
		if !ok {
			return netip.Addr{}, ErrNoKey
		}
	}
	name := "x-forwarded-for"
	if c.forwarded {
		name = "forwarded"
	}
	var fwd []string
	if len(c.trusted) > 0 {
		fwd = metadata.ValueFromIncomingContext(ctx, name)
	}
	return c.Resolve(peerAddr, fwd)
}

// GRPCKey is a GRPCKeyFunc: the key of the RPC's client address.
func (c *ClientIP) GRPCKey(ctx context.Context, _ string) (string, error) {
	a, err := c.FromContext(ctx)
	if err != nil {
		return "", err
	}
	return c.Key(a), nil
}
