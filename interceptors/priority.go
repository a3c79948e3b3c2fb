package interceptors

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
