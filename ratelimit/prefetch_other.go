//go:build !amd64

package ratelimit

// prefetch does nothing where the package has no prefetch instruction.
func prefetch(addr uintptr) {}
