package loadbalancer

import (
	"sync"
	"testing"
)

// TestKeyLocks: one key is held by one caller at a time, and a key nobody holds or waits for
// leaves no entry behind (Services come and go).
func TestKeyLocks(t *testing.T) {
	var k keyLocks
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := range 50 {
		key := []string{"a", "b"}[i%2]
		wg.Go(func() {
			defer k.lock(key)()
			mu.Lock()
			inside[key]++
			n := inside[key]
			mu.Unlock()
			if n != 1 {
				t.Errorf("%d callers inside key %s at once", n, key)
			}
			mu.Lock()
			inside[key]--
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := k.held(); n != 0 {
		t.Errorf("%d keys left after every unlock, want 0", n)
	}
}
