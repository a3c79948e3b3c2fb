package interceptors

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/ratelimit"
)

// srvQuotas is the part of a rate-limited route shared by HTTP and gRPC:
// the tiers, their names, the RateLimit-Policy value, and a pool of
// per-request scratch space so that deciding allocates nothing of its own.
type srvQuotas struct {
	tiers  *ratelimit.Tiers
	names  []string // as given
	sfName []string // serialised as structured-field Strings
	policy string   // the RateLimit-Policy field value
	quota  []int64  // each tier's advertised quota (q)
	pool   sync.Pool
}

// srvScratch is one request's keys and per-tier results.
type srvScratch struct {
	keys []string
	each []ratelimit.Result
	buf  []byte
}

// srvQuota is an HTTPQuota or a GRPCQuota, as srvNewQuotas reads it.
type srvQuota interface {
	srvParts() (name string, lim *ratelimit.Limiter, noKey bool)
}

func (q HTTPQuota) srvParts() (string, *ratelimit.Limiter, bool) {
	return q.Name, q.Limiter, q.Key == nil
}
func (q GRPCQuota) srvParts() (string, *ratelimit.Limiter, bool) {
	return q.Name, q.Limiter, q.Key == nil
}

// srvNewQuotas validates the quotas of an HTTP route or a gRPC service
// (non-empty, valid and unique names, no nil limiter or key) and builds the
// tiers; what names the constructor in errors.
func srvNewQuotas[Q srvQuota](what string, quotas []Q) (*srvQuotas, error) {
	names := make([]string, len(quotas))
	lims := make([]*ratelimit.Limiter, len(quotas))
	keysNil := make([]bool, len(quotas))
	for i, q := range quotas {
		names[i], lims[i], keysNil[i] = q.srvParts()
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("sluice/interceptors: %s: no quotas", what)
	}
	var errs []error
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		if err := srvValidPolicyName(name); err != nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: quota %d: %w", what, i, err))
		} else if seen[name] {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: quota %d: duplicate policy name %q", what, i, name))
		}
		seen[name] = true
		if lims[i] == nil {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: quota %d (%q): nil limiter", what, i, name))
		}
		if keysNil[i] {
			errs = append(errs, fmt.Errorf("sluice/interceptors: %s: quota %d (%q): nil key extractor", what, i, name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	tiers, err := ratelimit.All(lims...)
	if err != nil {
		return nil, fmt.Errorf("sluice/interceptors: %s: %w", what, err)
	}
	q := &srvQuotas{tiers: tiers, names: append([]string(nil), names...)}
	members := make([]srvPolicyMember, len(names))
	q.quota = make([]int64, len(names))
	for i, name := range names {
		members[i] = srvPolicyOf(name, lims[i])
		q.quota[i] = members[i].quota
		s, err := srvSFString(name)
		if err != nil {
			return nil, fmt.Errorf("sluice/interceptors: %s: quota %d: %w", what, i, err)
		}
		q.sfName = append(q.sfName, s)
	}
	if q.policy, err = srvPolicyField(members); err != nil {
		return nil, fmt.Errorf("sluice/interceptors: %s: %w", what, err)
	}
	n := len(names)
	q.pool.New = func() any {
		return &srvScratch{keys: make([]string, n), each: make([]ratelimit.Result, n), buf: make([]byte, 0, 32*n)}
	}
	return q, nil
}

func (q *srvQuotas) get() *srvScratch { return q.pool.Get().(*srvScratch) }

func (q *srvQuotas) put(s *srvScratch) {
	clear(s.keys)
	clear(s.each)
	s.buf = s.buf[:0]
	q.pool.Put(s)
}

// srvKnown reports whether a tier's decision carries the key's real
// numbers (remaining units, reset time), to be sent in the RateLimit
// field: the limit's own decision, or a local fallback's while the store is
// down. A full store's refusal and a fail-open or fail-closed policy's
// decision read no state of the key: their numbers would be invented.
func srvKnown(r ratelimit.Result) bool {
	return r.Source == ratelimit.SourceLimit || r.Source == ratelimit.SourceFailLocal
}

// srvAnyKnown reports whether any tier's decision has numbers to send.
func srvAnyKnown(each []ratelimit.Result) bool {
	for _, r := range each {
		if srvKnown(r) {
			return true
		}
	}
	return false
}

// violated returns the names of the tiers whose quota refused the request
// (by the limit, or by a local fallback's copy of it). A refusal that is not
// the key's quota — a full store, a failed store's fail-closed policy — is
// not a violation: the middleware answers it as reduced capacity.
func (q *srvQuotas) violated(each []ratelimit.Result) []string {
	var v []string
	for i, r := range each {
		if !r.Allowed && srvKnown(r) {
			v = append(v, q.names[i])
		}
	}
	return v
}

// srvCapacityRefusal says why a refused request violated no quota: every
// enforcing tier that refused did so for a failed store's fail-closed
// policy (failed: WithFailOpen may admit it), or some tier's store is full.
func srvCapacityRefusal(each []ratelimit.Result) (failed bool) {
	failed = true
	for _, r := range each {
		if !r.Allowed && r.Source == ratelimit.SourceFull {
			failed = false
		}
	}
	return failed
}
