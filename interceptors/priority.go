package interceptors

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/shed"
)

// The names under which a request's priority (a shed.Priority, written as
// by its String method and read by shed.ParsePriority) travels between
// services. Client interceptors set them from the context; server
// interceptors read them when no other priority extractor is configured.
const (
	// PriorityHeader is the HTTP request header carrying the priority.
	PriorityHeader = "Sluice-Priority"
	// PriorityMetadataKey is the gRPC metadata key carrying the priority
	// (gRPC metadata keys are lower case).
	PriorityMetadataKey = "sluice-priority"
)

// priorityKey is the context key under which WithPriority stores a
// priority.
type priorityKey struct{}

// WithPriority returns a copy of ctx that carries priority p. The client
// Transport sends it in the PriorityHeader request header and the client
// interceptors in the PriorityMetadataKey metadata entry, so the server's
// shedder can drop the least important work first; the client throttle also
// keeps its accounts per priority. A priority beyond shed.Sheddable is stored
// as shed.Sheddable, the least important, as retry.Throttle's default
// accounts treat it.
// WithPriority is a context helper of the client half, not a ServerOption;
// the server reads priorities with MetadataPriority and HeaderPriority, or
// WithGRPCPriority and WithHTTPPriority.
func WithPriority(ctx context.Context, p shed.Priority) context.Context {
	return context.WithValue(ctx, priorityKey{}, min(p, shed.Sheddable))
}

// PriorityFrom returns the priority WithPriority stored in ctx, and whether
// there was one.
func PriorityFrom(ctx context.Context) (shed.Priority, bool) {
	p, ok := ctx.Value(priorityKey{}).(shed.Priority)
	return p, ok
}

// MetadataPriority reads an RPC's priority from the incoming metadata key
// PriorityMetadataKey (see readPriority): a missing, repeated or unreadable
// value gives shed.Critical. It is the default of WithGRPCPriority.
func MetadataPriority(ctx context.Context, _ string) shed.Priority {
	return readPriority(metadata.ValueFromIncomingContext(ctx, PriorityMetadataKey))
}

// HeaderPriority reads a request's priority from the header PriorityHeader
// (see readPriority): a missing, repeated or unreadable value gives
// shed.Critical. It is the default of WithHTTPPriority.
func HeaderPriority(r *http.Request) shed.Priority {
	return readPriority(r.Header.Values(PriorityHeader))
}

// readPriority reads a propagated priority from the values of
// PriorityHeader or PriorityMetadataKey, on both halves of the package:
// exactly one value, which shed.ParsePriority reads (bounded, any case)
// once surrounding spaces and tabs are trimmed. None, several or an
// unreadable one give shed.Critical: a caller cannot be refused for how it
// labels itself, only ranked.
func readPriority(vs []string) shed.Priority {
	if len(vs) != 1 {
		return shed.Critical
	}
	p, err := shed.ParsePriority(strings.Trim(vs[0], " \t"))
	if err != nil {
		return shed.Critical
	}
	return p
}
