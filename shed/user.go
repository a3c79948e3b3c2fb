package shed

// UserHash maps a user id (an account, an API key, a session) to the number
// a Shedder draws the user's cohort from: 64-bit FNV-1a of the id. Equal ids
// give equal numbers in every process and every run, so a user shed by one
// replica is shed by the others in the same rotation period.
func UserHash(id string) uint64 {
	const (
		offset = 14695981039346656037
		prime  = 1099511628211
	)
	h := uint64(offset)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime
	}
	return h
}
