//go:build bench

package bench

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/test/e2e/harness"
)

// writeTable prints the results as one Markdown table, a column per size and a row per figure,
// and writes it to $BENCH_OUT when set.
func writeTable(t *testing.T, results []result) {
	md := table(results)
	fmt.Println(md)
	if out := os.Getenv("BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			t.Errorf("write BENCH_OUT=%s: %v", out, err)
		}
	}
}

// table renders results; see docs/performance.md for what each row means.
func table(results []result) string {
	var b strings.Builder
	extra := ""
	if env := os.Getenv("BENCH_CCM_ENV"); env != "" {
		extra = ", CCM environment " + env
	}
	fmt.Fprintf(&b, "<!-- make bench, %s, %d CPUs, kube binaries %s, rate limit %d/h, page cache %s%s -->\n\n",
		time.Now().UTC().Format(time.RFC3339), runtime.NumCPU(), harness.BinDir(), rateLimit, envOr("BENCH_PAGECACHE", "cold"), extra)
	b.WriteString("| figure |")
	for _, r := range results {
		policies := ""
		switch {
		case r.size.official:
			policies = ", **official CCM**"
		case r.size.policiesOff:
			policies = ", policies off"
		}
		fmt.Fprintf(&b, " %d nodes, %d Services%s, %s%s |", r.size.nodes, r.size.services, r.size.poolNote(), r.size.churn(), policies)
	}
	b.WriteString("\n|---|")
	for range results {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	row := func(name string, cell func(r result) string) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, r := range results {
			fmt.Fprintf(&b, " %s |", cell(r))
		}
		b.WriteString("\n")
	}
	endpoints := func(phase string, get func(r result) counts) {
		routes := map[string]bool{}
		for _, r := range results {
			for route := range get(r).byRoute {
				routes[route] = true
			}
		}
		for _, route := range slices.Sorted(maps.Keys(routes)) {
			row(fmt.Sprintf("&nbsp;&nbsp;%s: `%s`", phase, route), func(r result) string { return num(get(r).byRoute[route]) })
		}
	}
	nodes := func(r result) counts { return r.nodesReq }
	services := func(r result) counts { return r.servicesReq }
	steady := func(r result) counts { return r.steadyReq }
	churn := func(r result) counts { return r.churnReq }

	row("**nodes**: requests until all nodes are initialised and routed", func(r result) string { return num(r.nodesReq.total) })
	row("&nbsp;&nbsp;of them mutating", func(r result) string { return num(r.nodesReq.mutating) })
	row("&nbsp;&nbsp;per node (one route each)", func(r result) string {
		return fmt.Sprintf("%.2f", float64(r.nodesReq.total)/float64(r.size.nodes))
	})
	endpoints("nodes", nodes)
	row("&nbsp;&nbsp;time (CCM start → last node initialised and routed)", func(r result) string { return secs(r.nodesTime) })
	row("**Services**: requests until all Services have an address", func(r result) string { return num(r.servicesReq.total) })
	row("&nbsp;&nbsp;of them mutating", func(r result) string { return num(r.servicesReq.mutating) })
	row("&nbsp;&nbsp;per Service", func(r result) string {
		if r.size.services == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", float64(r.servicesReq.total)/float64(r.size.services))
	})
	endpoints("Services", services)
	row("&nbsp;&nbsp;time (Services created → last one has an address)", func(r result) string { return secs(r.servicesTime) })
	row("**steady**: requests/hour (requests in the window × 3600 s / window)", func(r result) string {
		return fmt.Sprintf("%.0f (%d in %s)", float64(r.steadyReq.total)*float64(time.Hour)/float64(r.steady), r.steadyReq.total, r.steady)
	})
	endpoints("steady", steady)
	churned := func(cell func(r result) string) func(r result) string {
		return func(r result) string {
			if r.size.join == 0 {
				return "–"
			}
			return cell(r)
		}
	}
	row("**churn**: requests until every joining node is a target of every Service and routed", churned(func(r result) string { return num(r.churnReq.total) }))
	row("&nbsp;&nbsp;of them mutating / the minimum (a route per node, a target per node and Service selecting it)", churned(func(r result) string {
		return fmt.Sprintf("%d / %d", r.churnReq.mutating, churnMinimum(r.size))
	}))
	row("&nbsp;&nbsp;requests per node event (per joining node)", churned(func(r result) string {
		return fmt.Sprintf("%.1f", float64(r.churnReq.total)/float64(r.size.join))
	}))
	row("&nbsp;&nbsp;load balancer reads (`GET /v1/load_balancers`) per node event, most in one event", churned(func(r result) string {
		most := 0
		for _, ev := range r.churnEvents {
			most = max(most, ev.byRoute["GET /v1/load_balancers"])
		}
		return fmt.Sprintf("%.1f, %d", float64(r.churnLBReads)/float64(r.size.join), most)
	}))
	row("&nbsp;&nbsp;requests that do not mutate (reads, action polls) per node event, most in one event", churned(func(r result) string {
		most := 0
		for _, ev := range r.churnEvents {
			most = max(most, ev.total-ev.mutating)
		}
		return fmt.Sprintf("%.1f, %d", float64(r.churnReq.total-r.churnReq.mutating)/float64(r.size.join), most)
	}))
	row("&nbsp;&nbsp;requests / the minimal mutations", churned(func(r result) string {
		return fmt.Sprintf("%.2f", float64(r.churnReq.total)/float64(churnMinimum(r.size)))
	}))
	endpoints("churn", churn)
	row("&nbsp;&nbsp;time (first node created → every target and route in place)", churned(func(r result) string { return secs(r.churnTime) }))
	row("rate-limited replies (429), all phases", func(r result) string {
		return num(r.nodesReq.limited + r.servicesReq.limited + r.steadyReq.limited + r.churnReq.limited)
	})
	row("peak RSS (VmHWM), MiB", func(r result) string { return mib(r.peakRSS) })
	row("steady RSS (VmRSS at the end of the window), MiB", func(r result) string { return mib(r.steadyRSS) })
	row("&nbsp;&nbsp;peak anonymous RSS (RssAnon, sampled each second), MiB", func(r result) string { return mib(r.peakAnon) })
	row("&nbsp;&nbsp;steady anonymous RSS (RssAnon: heap, stacks), MiB", func(r result) string { return mib(r.steadyAnon) })
	row("&nbsp;&nbsp;steady file RSS (RssFile: mapped pages of the binary), MiB", func(r result) string { return mib(r.steadyFile) })
	row("CPU seconds, start → all nodes initialised and routed (utime+stime)", func(r result) string { return fmt.Sprintf("%.1f", r.cpuNodes) })
	row("CPU seconds, start → all Services addressed", func(r result) string { return fmt.Sprintf("%.1f", r.cpuInit) })
	row("CPU seconds in the steady window", func(r result) string { return fmt.Sprintf("%.1f", r.cpuSteady) })
	row("&nbsp;&nbsp;per idle minute", func(r result) string { return fmt.Sprintf("%.2f", r.cpuPerIdleMinute()) })
	row("CPU seconds of the churn phase", churned(func(r result) string { return fmt.Sprintf("%.1f", r.cpuChurn) }))
	row("CPU seconds, all phases", func(r result) string { return fmt.Sprintf("%.1f", r.cpuTotal()) })
	if slices.ContainsFunc(results, func(r result) bool { return r.size.official }) {
		pairs := officialPairs(results)
		ratio := func(name string, get func(r result) float64) {
			fmt.Fprintf(&b, "| %s |", name)
			for i, r := range results {
				o, ok := pairs[i]
				if !ok || get(o) <= 0 {
					b.WriteString(" – |")
					continue
				}
				fmt.Fprintf(&b, " %.2f |", get(r)/get(o))
			}
			b.WriteString("\n")
		}
		ratio("**CPU / the official's** (its run of the same scenario after this one): start → nodes initialised", func(r result) float64 { return r.cpuNodes })
		ratio("&nbsp;&nbsp;start → all Services addressed", func(r result) float64 { return r.cpuInit })
		ratio("&nbsp;&nbsp;per idle minute", result.cpuPerIdleMinute)
		ratio("&nbsp;&nbsp;all phases", result.cpuTotal)
	}
	return b.String()
}

// officialPairs maps the index of each run of this CCM to the official CCM's run paired with it:
// the first official run of the same scenario after it.
func officialPairs(results []result) map[int]result {
	pairs := map[int]result{}
	for i, r := range results {
		if r.size.official {
			continue
		}
		for _, x := range results[i+1:] {
			if x.size.official && x.size.scenario() == r.size.scenario() {
				pairs[i] = x
				break
			}
		}
	}
	return pairs
}

func num(n int) string { return fmt.Sprintf("%d", n) }

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }
