// Package interceptors wires sluice's guards — the per-key rate limiter
// (package ratelimit), the adaptive gate (package adaptive) and the priority
// shedder (package shed) — into gRPC servers and clients and net/http
// handlers and clients.
//
// Server side, each guard is a gRPC unary or stream interceptor and an HTTP
// middleware. Refusals carry the status clients expect: a rate limit is
// RESOURCE_EXHAUSTED or 429, shedding or a full gate is UNAVAILABLE or 503,
// always with a retry time (google.rpc.RetryInfo and the
// grpc-retry-pushback-ms trailer; Retry-After), and limited HTTP routes send
// the IETF RateLimit-Policy and RateLimit fields on every response.
//
// Client side, interceptors and an http.RoundTripper keep a client from
// turning an overload into a retry storm: adaptive client throttling, a
// retry budget, capped exponential backoff with full jitter that honours the
// server's retry time, and priority propagation.
package interceptors
