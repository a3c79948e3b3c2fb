package interceptors

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// The problem types (RFC 9457) of the middleware's refusals. The first two
// are those of draft-ietf-httpapi-ratelimit-headers.
const (
	// ProblemQuotaExceeded: the request exceeded one or more quota
	// policies (429). The body lists them in "violated-policies".
	ProblemQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"
	// ProblemReducedCapacity: the server is temporarily refusing work it
	// cannot serve in time: shed, the concurrency gate full, or its rate-limit
	// store unavailable (503).
	ProblemReducedCapacity = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"
	// ProblemBadRequest: the request did not carry a usable rate-limit key
	// (a missing, malformed or oversized header) (400).
	ProblemBadRequest = "about:blank"
)

// ProblemContentType is the media type of the refusal bodies.
const ProblemContentType = "application/problem+json"

// Problem is the body of a refusal: an RFC 9457 problem details object,
// with the quota-exceeded extension member "violated-policies".
type Problem struct {
	// Type is the problem type URI: ProblemQuotaExceeded,
	// ProblemReducedCapacity or ProblemBadRequest.
	Type string `json:"type"`
	// Title is a short, fixed summary of the problem type.
	Title string `json:"title"`
	// Status repeats the response's status code.
	Status int `json:"status"`
	// Detail explains this occurrence; it never echoes request input.
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies names the quota policies (as in RateLimit-Policy)
	// that refused the request.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// RetryAfter repeats the Retry-After field, in whole seconds.
	RetryAfter int64 `json:"retry-after,omitempty"`
}

// srvWriteProblem writes p as the response, with Retry-After if retry is
// positive. The body is small and fixed in shape, so the response is never
// larger than the names configured on the route.
func srvWriteProblem(w http.ResponseWriter, p Problem, retry time.Duration) {
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	if retry > 0 {
		v := srvRetryAfterValue(retry)
		h.Set(RetryAfterHeader, v)
		p.RetryAfter, _ = strconv.ParseInt(v, 10, 64)
	}
	body, err := json.Marshal(p)
	if err != nil { // cannot happen for this struct; answer without a body
		w.WriteHeader(p.Status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

func srvQuotaProblem(violated []string) Problem {
	return Problem{
		Type:             ProblemQuotaExceeded,
		Title:            "Quota exceeded",
		Status:           http.StatusTooManyRequests,
		Detail:           "The request exceeds the quota of the policies listed; retry after the time given.",
		ViolatedPolicies: violated,
	}
}

func srvCapacityProblem(detail string) Problem {
	return Problem{
		Type:   ProblemReducedCapacity,
		Title:  "Temporarily reduced capacity",
		Status: http.StatusServiceUnavailable,
		Detail: detail,
	}
}

func srvBadRequestProblem(detail string) Problem {
	return Problem{
		Type:   ProblemBadRequest,
		Title:  "Bad Request",
		Status: http.StatusBadRequest,
		Detail: detail,
	}
}
