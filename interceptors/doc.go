// Package interceptors wires sluice's guards — the per-key rate limiter
// (package ratelimit), the adaptive gate (package adaptive) and the priority
// shedder (package shed) — into gRPC servers and clients and net/http
// handlers and clients.
//
// # Server side
//
// Each guard is a pair of gRPC interceptors (RateLimitInterceptors,
// GateInterceptors, ShedInterceptors return a GRPCInterceptors with Unary
// and Stream; the gate's and the shedder's also a Tap, a tap handle that
// refuses under CPU overload before an RPC costs anything) and an HTTP
// middleware, func(http.Handler) http.Handler (RateLimitMiddleware,
// GateMiddleware, ShedMiddleware). Refusals carry the
// status clients expect: a quota refusal is RESOURCE_EXHAUSTED or 429;
// shedding, a full gate, a failed rate-limit store (whether the limiter
// returned no decision or the store's fail-closed policy refused) and a
// rate-limit store full of other keys are UNAVAILABLE or 503, never a quota
// refusal.
// Every refusal for quota or overload carries a retry time that is never
// earlier than the guard's own (rounded up, plus any WithRetryJitter): a google.rpc.RetryInfo detail
// and the RetryPushbackTrailer trailer on gRPC (the detail alone from a
// Tap, which cannot send trailers), Retry-After and an RFC 9457
// problem+json body on HTTP. Every response of a rate-limited HTTP route
// carries the IETF RateLimit-Policy field, and every decided one the
// RateLimit field for the quotas whose decision read the key's state
// (draft-ietf-httpapi-ratelimit-headers, named policies; Retry-After is
// never earlier than a refusing policy's t): a quota decided by a failed
// store's fail-open or fail-closed policy reports no invented numbers. Keys come from
// extractors (HeaderKey, APIKey, UserKey, ClientIP with trusted proxies;
// forwarding headers are ignored unless the peer is trusted), priorities from
// the PriorityHeader or PriorityMetadataKey. Tokens of the gate and the
// shedder are held until the handler returns (a stream's, until its handler
// returns) and released exactly once, also when the handler panics.
// Server options are named With…, and an option's type says which
// constructors take it: a ServerOption applies to all six, a RateOption to
// the rate-limit ones, an HTTPShedOption to ShedMiddleware only, and so on;
// each constructor's options have an interface of its own
// (RateLimitMiddlewareOption, ...), so an option that does not apply does
// not compile.
//
// # Client side
//
// UnaryClientInterceptor, StreamClientInterceptor and the http.RoundTripper
// Transport keep a client from turning an overload into a retry storm:
// adaptive client throttling (retry.Throttle), a retry budget (retry.Budget),
// capped exponential backoff with full jitter that never retries before the
// server's retry time (pushback trailer, RetryInfo, Retry-After), and
// propagation of the priority that WithPriority puts in a context. Client
// options are ClientOptions named Client…, so that a call site shows which
// half an option configures.
//
// Everything is validated at construction, never per request: the
// constructors' errors start "sluice/interceptors: ", those of the guards
// and the clients go on with the constructor's name and report every
// invalid option at once.
//
// # Wiring
//
// A gRPC server and an HTTP handler limited per client IP, then shed by
// priority through one adaptive gate:
//
//	gate, _ := adaptive.New(gradient.New())
//	shedder, _ := shed.New(gate)
//	perIP, _ := ratelimit.New(ratelimit.GCRA, ratelimit.Limit{Rate: 100, Period: time.Second})
//	ip, _ := interceptors.NewClientIP(interceptors.WithIPTrustedProxies("10.0.0.0/8"))
//
//	limit, err := interceptors.RateLimitInterceptors([]interceptors.GRPCQuota{{Name: "per-ip", Limiter: perIP, Key: ip.GRPCKey}})
//	if err != nil { ... }
//	sh, err := interceptors.ShedInterceptors(shedder)
//	if err != nil { ... }
//	srv := grpc.NewServer(
//		grpc.InTapHandle(sh.Tap), // under CPU overload, refuses before the RPC costs anything
//		grpc.ChainUnaryInterceptor(limit.Unary, sh.Unary), // rate limits outside the gate
//		grpc.ChainStreamInterceptor(limit.Stream, sh.Stream),
//	)
//
//	limitMW, err := interceptors.RateLimitMiddleware([]interceptors.HTTPQuota{{Name: "per-ip", Limiter: perIP, Key: ip.HTTPKey}})
//	if err != nil { ... }
//	shedMW, err := interceptors.ShedMiddleware(shedder)
//	if err != nil { ... }
//	http.Handle("/api/", limitMW(shedMW(apiHandler)))
//
// and their clients:
//
//	unary, err := interceptors.UnaryClientInterceptor()
//	conn, err := grpc.NewClient(target, grpc.WithUnaryInterceptor(unary), ...)
//	tr, err := interceptors.NewTransport(nil)
//	client := &http.Client{Transport: tr}
//
// The package example (Example) is the same wiring, compiled.
package interceptors

// The source is laid out by half, so a reader of one half need not read the
// other:
//
//	server.go, server_options.go     what every server constructor shares: quotas, ServerOption
//	server_http.go, server_problem.go   the net/http middleware and its problem+json refusals
//	server_grpc.go                      the gRPC server interceptors
//	server_headers.go                   retry times and the RateLimit fields, for both transports
//	server_keys.go, server_keys_ip.go   key extractors (headers, metadata, API keys, client IP)
//	client.go                           what every client shares: ClientOption, the retry policy
//	client_http.go                      the http.RoundTripper (Transport)
//	client_grpc.go                      the gRPC client interceptors
//	priority.go                         the priority on the wire, read by servers, sent by clients
//	deprecated.go                       former names, kept for one release
