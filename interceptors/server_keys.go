package interceptors

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"google.golang.org/grpc/metadata"
)

// The errors of the key extractors. The middleware answers both with 400
// (problem+json) and the interceptors with INVALID_ARGUMENT; neither ever
// echoes the offending input back.
var (
	// ErrNoKey: the request does not carry what the extractor keys on
	// (a missing header, no authenticated user). FirstHTTPKey and FirstGRPCKey
	// move on to the next extractor on this error, and only on this one.
	ErrNoKey = errors.New("sluice/interceptors: no rate-limit key in the request")
	// ErrBadKey: what the extractor keys on is malformed, repeated or too
	// long to be a key.
	ErrBadKey = errors.New("sluice/interceptors: malformed rate-limit key")
)

// MaxKeyValueLen is the longest header or metadata value a key extractor
// reads, in bytes; longer values are ErrBadKey. Keys built from values are
// at most this long plus a short prefix, within ratelimit.DefaultMaxKeyLen.
const MaxKeyValueLen = 200

// MaxAPIKeyLen is the longest API key APIKey accepts, in bytes. The key
// itself is never used as a rate-limit key, only its hash.
const MaxAPIKeyLen = 1024

// HTTPKeyFunc returns the rate-limit key of an HTTP request, or an error
// (ErrNoKey, ErrBadKey, or the function's own) that refuses the request
// with 400. It must be safe for concurrent use and must not read the body.
type HTTPKeyFunc func(r *http.Request) (string, error)

// GRPCKeyFunc returns the rate-limit key of an RPC, from its context
// (metadata, peer, authentication) and full method name
// ("/package.Service/Method"), or an error that refuses it with
// INVALID_ARGUMENT. It must be safe for concurrent use.
type GRPCKeyFunc func(ctx context.Context, fullMethod string) (string, error)

// srvCheckValue validates one header or metadata value for use in a key:
// 1 to limit bytes of visible ASCII (no spaces, no controls).
func srvCheckValue(v string, limit int) error {
	if v == "" {
		return ErrNoKey
	}
	if len(v) > limit {
		return ErrBadKey
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= 0x20 || v[i] >= 0x7f {
			return ErrBadKey
		}
	}
	return nil
}

// srvOne returns the single value of vs, trimmed of spaces and tabs:
// ErrNoKey if there is none, ErrBadKey if there are several (a request
// that names two keys names none we could trust).
func srvOne(vs []string) (string, error) {
	switch len(vs) {
	case 0:
		return "", ErrNoKey
	case 1:
		return strings.Trim(vs[0], " \t"), nil
	}
	return "", ErrBadKey
}

// srvValueKey is the key of HeaderKey and MetadataKey: prefix and the single
// value of vs, which srvOne and srvCheckValue accept.
func srvValueKey(prefix string, vs []string) (string, error) {
	v, err := srvOne(vs)
	if err != nil {
		return "", err
	}
	if err := srvCheckValue(v, MaxKeyValueLen); err != nil {
		return "", err
	}
	return prefix + v, nil
}

// srvCheckName validates a header or metadata name given to a constructor.
func srvCheckName(name string) error {
	if name == "" {
		return errors.New("sluice/interceptors: empty header name")
	}
	if !isToken(name) {
		return fmt.Errorf("sluice/interceptors: invalid header name %q", name)
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (§5.6.2), as field names
// and methods must be: one or more visible ASCII characters other than the
// delimiters "(),/:;<=>?@[\]{}. Both halves check names with it.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// HeaderKey returns an extractor that keys a request on the value of the
// header name, as "h:<canonical name>:<value>". The header must appear once,
// with 1 to MaxKeyValueLen bytes of visible ASCII; absent is ErrNoKey,
// anything else ErrBadKey. It returns an error for an invalid header name.
func HeaderKey(name string) (HTTPKeyFunc, error) {
	if err := srvCheckName(name); err != nil {
		return nil, err
	}
	canon := http.CanonicalHeaderKey(name)
	prefix := "h:" + canon + ":"
	return func(r *http.Request) (string, error) {
		return srvValueKey(prefix, r.Header.Values(canon))
	}, nil
}

// MetadataKey returns an extractor that keys an RPC on the value of the
// incoming metadata key name, as "md:<name>:<value>", under the rules of
// HeaderKey. It returns an error for an invalid or binary ("-bin") key.
func MetadataKey(name string) (GRPCKeyFunc, error) {
	if err := srvCheckName(name); err != nil {
		return nil, err
	}
	name = strings.ToLower(name)
	if strings.HasSuffix(name, "-bin") {
		return nil, fmt.Errorf("sluice/interceptors: binary metadata key %q cannot be a rate-limit key", name)
	}
	prefix := "md:" + name + ":"
	return func(ctx context.Context, _ string) (string, error) {
		return srvValueKey(prefix, metadata.ValueFromIncomingContext(ctx, name))
	}, nil
}

// srvAPIKey reads an API key from a single header or metadata value:
// "Bearer <token>" (scheme in any case) or the bare token, 1 to
// MaxAPIKeyLen bytes of visible ASCII. The key returned is
// "apikey:" and the first 128 bits of the token's SHA-256 in hex, so that
// secrets never reach the limiter's store or its metrics.
func srvAPIKey(vs []string) (string, error) {
	v, err := srvOne(vs)
	if err != nil {
		return "", err
	}
	if len(v) >= 6 && strings.EqualFold(v[:6], "bearer") && (len(v) == 6 || v[6] == ' ') {
		v = strings.TrimLeft(v[6:], " ")
	}
	if err := srvCheckValue(v, MaxAPIKeyLen); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(v))
	var buf [7 + 32]byte
	copy(buf[:], "apikey:")
	hex.Encode(buf[7:], sum[:16])
	return string(buf[:]), nil
}

// APIKey returns an extractor that keys a request on the API key in the
// header name (e.g. "Authorization" or "X-API-Key"): a bare token or
// "Bearer <token>". The key is "apikey:" and a hash of the token, so the
// secret never reaches the limiter's store. Absent is ErrNoKey; repeated,
// empty after the scheme, longer than MaxAPIKeyLen or not visible ASCII is
// ErrBadKey. The extractor does not authenticate the key: put the limit
// after authentication, or pair it with a per-IP tier, so that invented keys
// cannot mint fresh allowances.
func APIKey(name string) (HTTPKeyFunc, error) {
	if err := srvCheckName(name); err != nil {
		return nil, err
	}
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		return srvAPIKey(r.Header.Values(canon))
	}, nil
}

// MetadataAPIKey is APIKey for gRPC: the API key in the incoming metadata
// key name (e.g. "authorization").
func MetadataAPIKey(name string) (GRPCKeyFunc, error) {
	if err := srvCheckName(name); err != nil {
		return nil, err
	}
	name = strings.ToLower(name)
	return func(ctx context.Context, _ string) (string, error) {
		return srvAPIKey(metadata.ValueFromIncomingContext(ctx, name))
	}, nil
}

// srvUserKey builds "user:<id>" from what user returned.
func srvUserKey(id string, ok bool) (string, error) {
	if !ok || id == "" {
		return "", ErrNoKey
	}
	if len(id) > MaxKeyValueLen {
		return "", ErrBadKey
	}
	return "user:" + id, nil
}

// UserKey returns an extractor that keys a request on its authenticated
// user, as "user:<id>", where user reads the id that the authentication
// middleware put in the request's context (ok false, or an empty id, when
// there is none: ErrNoKey; an id longer than MaxKeyValueLen is ErrBadKey).
// It returns an error for a nil user.
func UserKey(user func(ctx context.Context) (id string, ok bool)) (HTTPKeyFunc, error) {
	if user == nil {
		return nil, errors.New("sluice/interceptors: UserKey: nil user function")
	}
	return func(r *http.Request) (string, error) {
		return srvUserKey(user(r.Context()))
	}, nil
}

// GRPCUserKey is UserKey for gRPC: user reads the id that an
// authentication interceptor put in the RPC's context.
func GRPCUserKey(user func(ctx context.Context) (id string, ok bool)) (GRPCKeyFunc, error) {
	if user == nil {
		return nil, errors.New("sluice/interceptors: GRPCUserKey: nil user function")
	}
	return func(ctx context.Context, _ string) (string, error) {
		return srvUserKey(user(ctx))
	}, nil
}

// MethodKey keys an RPC on its full method name, for a per-endpoint tier.
// Method names are chosen by the server's registered services, so they are
// bounded; a name longer than MaxKeyValueLen is ErrBadKey.
func MethodKey(_ context.Context, fullMethod string) (string, error) {
	if fullMethod == "" {
		return "", ErrNoKey
	}
	if len(fullMethod) > MaxKeyValueLen {
		return "", ErrBadKey
	}
	return fullMethod, nil
}

// FirstHTTPKey returns an extractor that tries fns in order and returns
// the first key found: an extractor's ErrNoKey moves on to the next one,
// any other error refuses the request. If none finds a key, it returns
// ErrNoKey. Typical use: the API key if there is one, else the client IP.
// It returns an error if fns is empty or holds nil.
func FirstHTTPKey(fns ...HTTPKeyFunc) (HTTPKeyFunc, error) {
	fns, err := srvCheckExtractors("FirstHTTPKey", fns)
	if err != nil {
		return nil, err
	}
	return func(r *http.Request) (string, error) {
		for _, f := range fns {
			k, err := f(r)
			if errors.Is(err, ErrNoKey) {
				continue
			}
			return k, err
		}
		return "", ErrNoKey
	}, nil
}

// srvCheckExtractors returns a copy of the extractors given to what
// (FirstHTTPKey or FirstGRPCKey), or an error if there are none or one is nil.
func srvCheckExtractors[F HTTPKeyFunc | GRPCKeyFunc](what string, fns []F) ([]F, error) {
	if len(fns) == 0 {
		return nil, fmt.Errorf("sluice/interceptors: %s: no extractors", what)
	}
	for i, f := range fns {
		if f == nil {
			return nil, fmt.Errorf("sluice/interceptors: %s: extractor %d is nil", what, i)
		}
	}
	return slices.Clone(fns), nil
}

// FirstGRPCKey is FirstHTTPKey for gRPC.
func FirstGRPCKey(fns ...GRPCKeyFunc) (GRPCKeyFunc, error) {
	fns, err := srvCheckExtractors("FirstGRPCKey", fns)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, m string) (string, error) {
		for _, f := range fns {
			k, err := f(ctx, m)
			if errors.Is(err, ErrNoKey) {
				continue
			}
			return k, err
		}
		return "", ErrNoKey
	}, nil
}
