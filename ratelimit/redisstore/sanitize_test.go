package redisstore

import (
	"strings"
	"testing"
)

// FuzzSanitize: whatever a caller puts in a key, the Redis key's hash tag
// has no braces (it cannot pick another slot), is at most 64 bytes, is the
// key itself when that is short and plain, and distinct keys keep distinct
// tags (a hashed tag starts with '#', which no plain key contains).
func FuzzSanitize(f *testing.F) {
	for _, k := range []string{"user:42", "{evil}", "a}b{c", "", "#x", strings.Repeat("k", 65), "ünï", "ip:10.0.0.1"} {
		f.Add(k, "other")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		sa, sb := sanitize(a), sanitize(b)
		if strings.ContainsAny(sa, "{}") || len(sa) > maxTagText {
			t.Fatalf("sanitize(%q) = %q", a, sa)
		}
		if sa != sanitize(a) {
			t.Fatal("not deterministic")
		}
		if (sa == a) != (len(a) > 0 && len(a) <= maxTagText && !strings.ContainsAny(a, "{}#") && plain(a)) {
			t.Fatalf("sanitize(%q) = %q: plain keys stay, others are hashed", a, sa)
		}
		if a != b && sa == sb {
			t.Fatalf("%q and %q share the tag %q", a, b, sa)
		}
		s := &Store{prefix: "p:"}
		k := s.redisKey(a, &policy{id: "gcra:1:1:1"})
		if clusterSlot(k) != clusterSlot("{"+sa+"}") {
			t.Fatalf("the key %q is not in its tag's slot", k)
		}
	})
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:/@=+,", c) >= 0) {
			return false
		}
	}
	return true
}

func TestClusterSlot(t *testing.T) {
	// Values from the Redis Cluster specification's CRC16 (XMODEM) and
	// `CLUSTER KEYSLOT`.
	for key, want := range map[string]uint16{"123456789": 0x31C3 % 16384, "foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443, "foo{}{bar}": 8363} {
		if got := clusterSlot(key); got != want {
			t.Errorf("clusterSlot(%q) = %d, want %d", key, got, want)
		}
	}
}
