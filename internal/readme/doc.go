// Package readme holds the test that keeps the repository's README honest:
// every Go block of README.md is built in a scratch module that uses this
// repository, so a snippet can never stop compiling unnoticed.
package readme
