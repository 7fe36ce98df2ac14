package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// gcFloorBytes is the heap below which the 15% target (defaultGCPercent) does not make the
// garbage collector run: after each collection the GC percent is set so that the next one
// comes when the heap reaches this size, or grows by 15%, whichever is later. With 15% alone
// the collector ran whenever the heap had grown by about 2 MiB: at 500 nodes, with a live heap
// of 12-15 MiB, 165 collections while the nodes initialised, about 40% of the CCM's CPU then
// and half of it when idle (docs/performance.md § CPU side by side with the official CCM). The
// percent is never below 15, so a large heap is collected as before. Measured at 500 nodes:
// 16 MiB took the CPU to the nodes initialised from 4.4-4.5 s to 3.4 s in two runs (the
// official: 3.7) for a peak RSS of 74.9-75.6 MiB (75.0 before; 0.9-1.9 MiB more anonymous
// memory); 20 MiB saved as much and a little more when idle, for 4 MiB more peak RSS.
const gcFloorBytes = 16 << 20

// setGC sets the garbage collector's target unless GOGC is set (the runtime's then, as
// before): defaultGCPercent, raised after each collection while the live heap is small
// (gcFloor). It returns the gcFloor, nil when GOGC is set.
func setGC(lookup func(string) (string, bool)) *gcFloor {
	if _, ok := lookup("GOGC"); ok {
		return nil
	}
	f := &gcFloor{floor: gcFloorBytes, percent: defaultGCPercent, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	debug.SetGCPercent(f.next())
	f.arm()
	return f
}

// gcFloor sets the GC percent after each collection to the larger of percent and what lets
// the heap reach floor before the next collection (next).
type gcFloor struct {
	floor   uint64
	percent int
	sample  []metrics.Sample // only the finalizer goroutine uses it after arm
	stopped atomic.Bool      // tests: no more updates
}

// gcSentinel is an object no one references: its finalizer runs after the collection that
// found it, sets the percent for the next one and arms a new sentinel. It holds a pointer so
// that it is not a tiny allocation (whose finalizers may never run).
type gcSentinel struct {
	f *gcFloor
	_ [16]byte
}

// arm allocates the sentinel of the next collection.
func (f *gcFloor) arm() {
	runtime.SetFinalizer(&gcSentinel{f: f}, func(s *gcSentinel) {
		if !s.f.stopped.Load() {
			debug.SetGCPercent(s.f.next())
			s.f.arm()
		}
	})
}

// next returns the GC percent for the live heap of the last collection: at least percent, more
// while the live heap grown by percent stays below floor.
func (f *gcFloor) next() int {
	metrics.Read(f.sample)
	var live uint64
	if f.sample[0].Value.Kind() == metrics.KindUint64 {
		live = f.sample[0].Value.Uint64()
	}
	return floorPercent(live, f.floor, f.percent)
}

// floorPercent is the GC percent that lets a heap of live bytes grow to floor, at least
// percent (and at most 1000, for a tiny heap at start).
func floorPercent(live, floor uint64, percent int) int {
	if live == 0 || live >= floor {
		return percent
	}
	p := (floor - live) * 100 / live
	if p > 1000 {
		return max(percent, 1000)
	}
	return max(percent, int(p))
}
