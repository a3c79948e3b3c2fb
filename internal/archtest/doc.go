// Package archtest holds the test that keeps docs/architecture.md honest:
// the import arrows between sluice's packages are the ones drawn there, so
// the picture of the house cannot drift from the code. It has no code of
// its own.
package archtest
