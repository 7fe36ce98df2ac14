package executor

import (
	"testing"

	"k8s.io/component-base/metrics/testutil"
)

func TestCountMutation(t *testing.T) {
	before, _ := testutil.GetCounterMetricValue(mutationsTotal.WithLabelValues("route.create", "add_route", resultDenied))
	countMutation("route.create", "add_route", resultDenied)
	after, err := testutil.GetCounterMetricValue(mutationsTotal.WithLabelValues("route.create", "add_route", resultDenied))
	if err != nil || after != before+1 {
		t.Errorf("counter %v -> %v (%v)", before, after, err)
	}
}
