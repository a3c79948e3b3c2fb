package redisstore

import "strconv"

// LegacyState is how a store treats the state that versions of this
// package before the binary state kept as text, under the earlier key
// names: "<prefix>{<key>}:tb:100:1000000:100" holding "d t" as decimal
// integers, where this version keeps "<prefix>{<key>}:tb2:100:1000000:100"
// holding the same numbers as little-endian doubles (FixedWindow,
// SlidingWindow, TokenBucket, GCRA; a SlidingLog's sorted set did not
// change, keeps its key and is shared as it is). It matters only while
// such keys can exist: during an upgrade from an earlier version, and for
// one reset time after its last process stopped.
//
// The upgrade path, with processes of the earlier version still deciding
// on the same Redis:
//
//  1. Roll out this version with WithLegacyState(LegacyShare): new and old
//     processes then decide on the same text keys, exactly as one limit
//     (the new processes run the lean scripts on the text state, at the
//     price of a second GET and a decimal format per decision; a key that
//     holds binary state is decided binary, see below).
//  2. When no process of the earlier version is left, roll out again with
//     the default, LegacyCarry: a key that has no binary state yet is
//     read once from its text key and carried over into the binary one;
//     LegacyShare processes of step 1 that are still running follow a key
//     once it holds binary state, so the two count as one limit again.
//  3. Optionally, one reset time (the longest Period of the limits) after
//     step 2, LegacyIgnore stops looking for text keys: the GET of a
//     missing text key that LegacyCarry pays on every key without binary
//     state (a fresh or expired key) is saved.
//
// Rolling out with the default straight from an earlier version (skipping
// step 1) is safe but not exact: each key's state is carried over the
// first time a new process decides it, but from then on, while old
// processes are still running, they keep counting on the text key and the
// new ones on the binary key, so while both run a key can be admitted up
// to twice what its limit admits (old and new processes each spend at most
// one limit from the state they share at the carry-over). Step 1 exists for
// rollouts that take longer than a few reset times, and for canaries.
type LegacyState uint8

// The legacy state modes.
const (
	// LegacyCarry (the default) reads a key's text state where it has no
	// binary state, decides on it and writes the result as binary state:
	// the state is carried over once, and an earlier version's process
	// no longer sees the key's admissions.
	LegacyCarry LegacyState = iota
	// LegacyShare decides on a key's text state, and writes it back as
	// text under the earlier key name, where the key has no binary state:
	// processes of the earlier version and of this one count as one
	// limit. Where a key holds binary state (written by a LegacyCarry or
	// LegacyIgnore process) it is decided as binary.
	LegacyShare
	// LegacyIgnore never reads text state: a key without binary state is
	// a fresh key. For a Redis that never held an earlier version's keys,
	// or once they have expired.
	LegacyIgnore
)

// String returns the mode's name.
func (l LegacyState) String() string {
	switch l {
	case LegacyCarry:
		return "legacy_carry"
	case LegacyShare:
		return "legacy_share"
	case LegacyIgnore:
		return "legacy_ignore"
	}
	return "LegacyState(" + strconv.Itoa(int(l)) + ")"
}

// code is the mode as the scripts' L: 0 never reads text keys, 1 carries
// their state over, 2 decides on them and writes them back.
func (l LegacyState) code() int64 {
	switch l {
	case LegacyCarry:
		return 1
	case LegacyShare:
		return 2
	}
	return 0
}
