package lbcache

import "time"

// SetClock replaces the clock of c, for tests of its ages.
func SetClock(c *Cache, now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}
