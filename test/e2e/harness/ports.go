package harness

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Ports that FreePort hands out lie below Linux's default ephemeral range (32768-60999), where
// the kernel picks the local ports of outgoing connections and of listeners on port 0: a port
// handed out for a process still starting cannot be taken by a connection meanwhile.
const (
	portLow  = 20000
	portHigh = 32768
)

// handedOut are the ports FreePort returned in this process: never returned twice, so tests that
// run in parallel (t.Parallel) never get the same port.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a TCP port on 127.0.0.1 that is free now and was never returned before in this
// process, for a process the test starts (for example the CCM's --secure-port). It is picked at
// random below the ephemeral range, so neither another test of this process, nor the kernel for
// an outgoing connection, takes it before the caller binds it; another process on the machine
// still could (rare enough on a test machine).
func FreePort(t T) int {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 1000 {
		p := portLow + rand.IntN(portHigh-portLow)
		if handedOut.ports[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		if err := l.Close(); err != nil {
			continue
		}
		handedOut.ports[p] = true
		return p
	}
	t.Fatalf("find a free port: none of 1000 tries between %d and %d was free", portLow, portHigh)
	return 0
}
