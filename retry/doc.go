// Package retry is the client side of overload: how a client retries so
// that its retries never become the overload. It holds three pieces, each
// usable alone and all three wired together by sluice's client
// interceptors (package interceptors):
//
//   - Backoff: capped exponential backoff with full jitter, never shorter
//     than the server's retry-after hint;
//   - Budget: retries capped at a share of first attempts, so a refusing
//     server sees at most that much extra load;
//   - Throttle: the SRE book's adaptive client-side throttling, which
//     refuses locally, without a round trip, once the server refuses most
//     of what a client sends.
//
// The server side (who is refused, and when to come back) is package shed;
// retry imports only the standard library and package clock.
package retry
