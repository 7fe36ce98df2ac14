//go:build bench

package bench

import (
	"strings"
	"testing"
)

func TestParseSizes(t *testing.T) {
	tests := []struct {
		in      string
		want    []size
		wantErr string
	}{
		{in: "10x2", want: []size{{nodes: 10, services: 2, join: 2, batch: 2}}},
		{in: "500x50", want: []size{{nodes: 500, services: 50, join: 10, batch: 10}}},
		{in: "500x50+10, 50x200+10/1", want: []size{{nodes: 500, services: 50, join: 10, batch: 10}, {nodes: 50, services: 200, join: 10, batch: 1}}},
		{in: "50x10+0", want: []size{{nodes: 50, services: 10}}},
		{in: "50x10+4/3", want: []size{{nodes: 50, services: 10, join: 4, batch: 3}}},
		{in: "50x10+4/9", want: []size{{nodes: 50, services: 10, join: 4, batch: 4}}},
		{in: "500x50p+10", want: []size{{nodes: 500, services: 50, join: 10, batch: 10, pools: true}}},
		{in: "500x50p+10,500x50+10", want: []size{{nodes: 500, services: 50, join: 10, batch: 10, pools: true}, {nodes: 500, services: 50, join: 10, batch: 10}}},
		{in: "500x20p+10", wantErr: "more than an lb11 takes"}, // 10 pools of 51 nodes
		{in: "50x3p", wantErr: "multiple of 2 Services"},
		{in: "50x10+16", wantErr: "join at most 15"},
		{in: "50x10+x", wantErr: "NODESxSERVICES[p][+JOIN[/BATCH]]"},
		{in: "50x10+2/0", wantErr: "NODESxSERVICES[p][+JOIN[/BATCH]]"},
		{in: "50", wantErr: "NODESxSERVICES[p][+JOIN[/BATCH]]"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSizes(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseSizes(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("parseSizes(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("parseSizes(%q)[%d] = %+v, want %+v", tt.in, i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestWithOfficialPairs(t *testing.T) {
	sizes, err := parseSizes("500x50+10,50x10")
	if err != nil {
		t.Fatal(err)
	}
	sizes, err = withPolicies(sizes, "both")
	if err != nil {
		t.Fatal(err)
	}
	sizes = withOfficial(sizes) // 500x50 on, official, 500x50 off, official, 50x10 on, official, off, official
	if len(sizes) != 8 || !sizes[1].official || sizes[1].policiesOff || sizes[1].scenario() != sizes[0].scenario() {
		t.Fatalf("withOfficial: %+v", sizes)
	}
	results := make([]result, len(sizes))
	for i, s := range sizes {
		results[i] = result{size: s, cpuInit: float64(i + 1)}
	}
	pairs := officialPairs(results)
	for i, want := range map[int]int{0: 1, 2: 3, 4: 5, 6: 7} {
		if got, ok := pairs[i]; !ok || got.cpuInit != results[want].cpuInit {
			t.Errorf("pair of run %d = %+v (%v), want run %d", i, got, ok, want)
		}
	}
	if len(pairs) != 4 {
		t.Errorf("%d pairs, want 4", len(pairs))
	}
	if !strings.Contains(table(results), "**CPU / the official's**") {
		t.Error("the table has no ratio rows")
	}
}
