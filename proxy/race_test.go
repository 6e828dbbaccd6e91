//go:build race

package proxy

// raceEnabled: under the race detector sync.Pool drops items at random
// (on purpose), so pooled buffers are allocated again now and then.
const raceEnabled = true
