package plugins

import (
	"errors"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Guest output budget. What the guest writes to stdout and stderr goes to Options.Stderr (by
// default one log record per write) through one token bucket per plugin name, shared by every
// instance and every revision of the plugin, so a plugin that writes on every call, or traps
// and gets a fresh instance, cannot flood the log.
const (
	// outputBurstBytes is the most output a plugin may write at once after a quiet spell.
	outputBurstBytes = 16 << 10
	// outputBytesPerSecond is the output a plugin may write per second in the long run.
	outputBytesPerSecond = 1 << 10
	// outputRecordCost is the least a write costs: many tiny writes would otherwise flood the
	// log with records while staying under the byte budget.
	outputRecordCost = 128
	// outputDroppedNote is written once when a plugin starts going over its budget.
	outputDroppedNote = "[plugin output dropped: over 1 KiB/s, see hcloud_ccm_plugin_output_dropped_bytes_total]\n"
)

// outputDropped counts guest output bytes dropped by the budget, by plugin name.
var outputDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "hcloud_ccm_plugin_output_dropped_bytes_total",
	Help: "Bytes a plugin wrote to stdout or stderr that were dropped because it went over its output budget (16 KiB burst, 1 KiB/s).",
}, []string{"plugin"})

// failures counts failed hook calls, by hook: the one failure metric of every hook. The host
// counts, since its validation is the contract (callers trust what it returns and fall back
// to their built-in behaviour on an error). The name MUST not change: dashboards use it.
var failures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "hcloud_ccm_plugin_failures_total",
	Help: "Plugin hook calls that failed or returned output the host refused, by hook; the caller used its built-in behaviour instead.",
}, []string{"hook"})

// callDuration is the time of one hook call, failed ones included (a timeout lasts
// Options.CallTimeout), by hook. The name MUST not change: dashboards use it.
var callDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "hcloud_ccm_plugin_call_duration_seconds",
	Help:    "Time of one plugin hook call, failed calls included, by hook.",
	Buckets: []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1},
}, []string{"hook"})

// observeCall records a call of hook that started at start: its duration, and a failure when
// err is not nil. err is returned unchanged.
func observeCall(hook string, start time.Time, err error) error {
	callDuration.WithLabelValues(hook).Observe(time.Since(start).Seconds())
	if err != nil {
		failures.WithLabelValues(hook).Inc()
	}
	return err
}

// RegisterMetrics registers the plugin host's metrics (hcloud_ccm_plugin_failures_total{hook},
// hcloud_ccm_plugin_call_duration_seconds{hook}, hcloud_ccm_plugin_output_dropped_bytes_total{plugin})
// with reg. Registering again on the same registry does nothing.
//
// # Errors
//
// A registration error other than "already registered".
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{failures, callDuration, outputDropped} {
		if err := reg.Register(c); err != nil {
			if are := (prometheus.AlreadyRegisteredError{}); !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

// outputBudget is the token bucket of one plugin, in bytes.
type outputBudget struct {
	mu       sync.Mutex
	tokens   float64
	last     time.Time
	dropping bool // the last write was cut; the note was written
}

var outputBudgets sync.Map // plugin name -> *outputBudget

func outputBudgetFor(name string) *outputBudget {
	b, _ := outputBudgets.LoadOrStore(name, &outputBudget{tokens: outputBurstBytes, last: time.Now()})
	return b.(*outputBudget)
}

// take returns how many of n bytes may be written now, and whether the dropped-output note is
// due (the first cut write after writes that passed).
func (b *outputBudget) take(n int, now time.Time) (allowed int, note bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = min(outputBurstBytes, b.tokens+el*outputBytesPerSecond)
		b.last = now
	}
	cost := float64(max(n, outputRecordCost))
	if b.tokens >= cost {
		b.tokens -= cost
		b.dropping = false
		return n, false
	}
	if b.tokens >= outputRecordCost {
		allowed = min(n, int(b.tokens))
		b.tokens = 0
	}
	note = !b.dropping
	b.dropping = true
	return allowed, note
}

// limitedWriter passes guest output to w within the plugin's budget and counts what it drops.
// It never fails the guest's write.
type limitedWriter struct {
	w      io.Writer
	budget *outputBudget
	plugin string
}

func newLimitedWriter(w io.Writer, plugin string) *limitedWriter {
	return &limitedWriter{w: w, budget: outputBudgetFor(plugin), plugin: plugin}
}

func (l *limitedWriter) Write(b []byte) (int, error) {
	n, note := l.budget.take(len(b), time.Now())
	if n > 0 {
		_, _ = l.w.Write(b[:n]) // guest output is best effort
	}
	if note {
		_, _ = io.WriteString(l.w, outputDroppedNote)
	}
	if dropped := len(b) - n; dropped > 0 {
		outputDropped.WithLabelValues(l.plugin).Add(float64(dropped))
	}
	return len(b), nil
}
