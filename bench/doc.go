// Package bench holds benchmarks of the sluice adaptive gate against peer
// libraries (failsafe-go, go-zero, go-kratos/aegis). It is a separate module
// so the peers never enter the library's go.mod. See README.md.
package bench
