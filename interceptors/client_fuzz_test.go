package interceptors

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzClientRetryAfter checks that any Retry-After value is either refused
// or read as a non-negative wait; that delta-seconds read as their number
// (or the cap); and that an HTTP-date reads as its distance from now.
func FuzzClientRetryAfter(f *testing.F) {
	for _, s := range []string{
		"0", "120", " 5\t", "007", "-1", "+1", "1.5", "", "99999999999999999999999",
		"Wed, 04 Mar 2040 05:06:37 GMT", "Wednesday, 04-Mar-40 05:06:37 GMT",
		"Wed Mar  4 05:06:37 2040", "Wed, 31 Feb 2026 00:00:00 GMT", "soon",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := cliRetryAfter(v, cliT0)
		if !ok {
			if d != 0 {
				t.Fatalf("cliRetryAfter(%q) refused with %v", v, d)
			}
			return
		}
		if d < 0 || d > cliMaxRetryAfter {
			t.Fatalf("cliRetryAfter(%q) = %v: out of [0, %v]", v, d, cliMaxRetryAfter)
		}
		trimmed := strings.Trim(v, " \t")
		if trimmed == "" {
			t.Fatalf("cliRetryAfter(%q) accepted an empty value", v)
		}
		if trimmed[0] >= '0' && trimmed[0] <= '9' {
			for _, c := range trimmed {
				if c < '0' || c > '9' {
					t.Fatalf("cliRetryAfter(%q) = %v: accepted a non-digit", v, d)
				}
			}
			n, err := strconv.ParseInt(trimmed, 10, 64)
			if err == nil && n <= int64(cliMaxRetryAfter/time.Second) {
				if d != time.Duration(n)*time.Second {
					t.Fatalf("cliRetryAfter(%q) = %v, want %ds", v, d, n)
				}
			} else if d != cliMaxRetryAfter {
				t.Fatalf("cliRetryAfter(%q) = %v, want the cap", v, d)
			}
			return
		}
		when, err := http.ParseTime(trimmed)
		if err != nil {
			t.Fatalf("cliRetryAfter(%q) accepted what is neither delta-seconds nor an HTTP-date", v)
		}
		if want := min(max(0, when.Sub(cliT0)), cliMaxRetryAfter); d != want {
			t.Fatalf("cliRetryAfter(%q) = %v, want %v", v, d, want)
		}
	})
}

// FuzzClientPushback checks that a grpc-retry-pushback-ms value allows a
// retry only when it is the canonical decimal form of a non-negative int32,
// and that the wait is then that many milliseconds.
func FuzzClientPushback(f *testing.F) {
	for _, s := range []string{"0", "1", "250", "-1", "-0", "+5", "05", "", " 5", "2147483647", "2147483648", "99999999999", "1e3"} {
		f.Add(s, false)
	}
	f.Add("10", true)
	f.Fuzz(func(t *testing.T, v string, twice bool) {
		vals := []string{v}
		if twice {
			vals = append(vals, v)
		}
		d, retry := cliPushback(vals)
		if !retry {
			if d != 0 {
				t.Fatalf("cliPushback(%q) refused with %v", vals, d)
			}
			ms, err := strconv.ParseInt(v, 10, 64)
			if !twice && err == nil && ms >= 0 && ms <= math.MaxInt32 && strconv.FormatInt(ms, 10) == v {
				t.Fatalf("cliPushback(%q) refused a valid pushback", vals)
			}
			return
		}
		if twice {
			t.Fatalf("cliPushback(%q) accepted two values", vals)
		}
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > math.MaxInt32 || strconv.FormatInt(ms, 10) != v {
			t.Fatalf("cliPushback(%q) = %v, retry: accepted a non-canonical value", v, d)
		}
		if d != time.Duration(ms)*time.Millisecond {
			t.Fatalf("cliPushback(%q) = %v, want %dms", v, d, ms)
		}
	})
}
