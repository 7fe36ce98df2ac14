package hcloudemu

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// lbMetricSeries are the time series each metric type of a load balancer
// answers, as the API names them.
var lbMetricSeries = map[string][]string{
	"open_connections":       {"open_connections"},
	"connections_per_second": {"connections_per_second"},
	"requests_per_second":    {"requests_per_second"},
	"bandwidth":              {"bandwidth.in", "bandwidth.out"},
}

// metricsReply is the body of GET /load_balancers/{id}/metrics.
type metricsReply struct {
	Metrics struct {
		Start      time.Time                `json:"start"`
		End        time.Time                `json:"end"`
		Step       float64                  `json:"step"`
		TimeSeries map[string]metricsSeries `json:"time_series"`
	} `json:"metrics"`
}

type metricsSeries struct {
	Values [][]any `json:"values"`
}

// getLoadBalancerMetrics serves GET /v1/load_balancers/{id}/metrics. The
// emulator carries no traffic, so every requested series is empty. type
// (repeatable or comma-separated, one of lbMetricSeries), start and end
// (RFC 3339, start not after end) are required; step is seconds (default
// 60). Anything else is 422 invalid_input.
func (e *Emulator) getLoadBalancerMetrics(r *http.Request) (int, any, error) {
	if _, err := e.lbByPath(r); err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	var out metricsReply
	out.Metrics.TimeSeries = map[string]metricsSeries{}
	for _, v := range q["type"] {
		for typ := range strings.SplitSeq(v, ",") {
			series, ok := lbMetricSeries[typ]
			if !ok {
				return 0, nil, errInvalid("type", "unknown metric type %q", typ)
			}
			for _, s := range series {
				out.Metrics.TimeSeries[s] = metricsSeries{Values: [][]any{}}
			}
		}
	}
	if len(out.Metrics.TimeSeries) == 0 {
		return 0, nil, errInvalid("type", "at least one metric type is required")
	}
	var err error
	if out.Metrics.Start, err = time.Parse(time.RFC3339, q.Get("start")); err != nil {
		return 0, nil, errInvalid("start", "start must be an RFC 3339 time")
	}
	if out.Metrics.End, err = time.Parse(time.RFC3339, q.Get("end")); err != nil {
		return 0, nil, errInvalid("end", "end must be an RFC 3339 time")
	}
	if out.Metrics.End.Before(out.Metrics.Start) {
		return 0, nil, errInvalid("end", "end must not be before start")
	}
	out.Metrics.Step = 60
	if s := q.Get("step"); s != "" {
		if out.Metrics.Step, err = strconv.ParseFloat(s, 64); err != nil || out.Metrics.Step <= 0 {
			return 0, nil, errInvalid("step", "step must be a positive number of seconds")
		}
	}
	return http.StatusOK, out, nil
}
