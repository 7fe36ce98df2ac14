// Package testutil holds small helpers shared by the tests of several packages: reading the
// events of a fake recorder and the counters of the metrics registry. Only tests import it.
package testutil

import (
	"testing"

	"k8s.io/client-go/tools/record"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Events drains the events recorded so far by rec ("Type Reason Message" strings), in order.
func Events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Metric returns the value of the counter or gauge name in the legacy metrics registry whose
// labels include every pair of labels; 0 when there is no such series yet.
func Metric(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}
