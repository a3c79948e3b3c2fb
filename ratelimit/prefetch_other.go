//go:build !amd64 || purego

package ratelimit

// prefetch does nothing where the package has no prefetch instruction
// (or is built with the purego tag).
func prefetch(addr uintptr) {}
