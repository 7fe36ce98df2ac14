package loadbalancer

import (
	"runtime"
	"testing"
)

// TestSubjectLocks: a second lock of a held key waits until the first is unlocked, another key
// does not wait, and no entry is left once nobody holds or waits for a key.
func TestSubjectLocks(t *testing.T) {
	var k subjectLocks
	unlockA := k.lock("uid:a")
	unlockB := k.lock("b") // another key: not held up by uid:a
	locked := make(chan struct{})
	go func() {
		unlock := k.lock("uid:a")
		close(locked)
		unlock()
	}()
	for users("uid:a", &k) != 2 { // the second caller waits for uid:a
		runtime.Gosched()
	}
	select {
	case <-locked:
		t.Fatal("a second lock of uid:a got it while the first held it")
	default:
	}
	unlockA()
	<-locked
	unlockB()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.locks) != 0 {
		t.Errorf("%d lock entries left after every unlock, want 0", len(k.locks))
	}
}

// users is how many hold or wait for key.
func users(key string, k *subjectLocks) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if m := k.locks[key]; m != nil {
		return m.users
	}
	return 0
}
