package loadbalancer

import "sync"

// keyLocks are mutexes by key (a load balancer group's name, a Service's UID). An entry lives
// while a caller holds or waits for it, so keys that come and go (Services) leave nothing
// behind. The zero value is ready to use.
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

// keyLock is the mutex of one key and how many callers hold or wait for it.
type keyLock struct {
	sync.Mutex
	users int
}

// lock locks key and returns the unlock, which must be called exactly once.
func (k *keyLocks) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	m := k.locks[key]
	if m == nil {
		m = &keyLock{}
		k.locks[key] = m
	}
	m.users++
	k.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		k.mu.Lock()
		if m.users--; m.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// held is how many keys are held or waited for (for tests).
func (k *keyLocks) held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.locks)
}
