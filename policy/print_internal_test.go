package policy

import (
	"bytes"
	"context"
	"flag"
	"github.com/policy-ccm/hcloud-policy-ccm/policy/input"
	"io"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// TestPrint_goesToTheLog checks that Rego print() reaches the klog log at verbosity 2, with its
// location and the revision.
func TestPrint_goesToTheLog(t *testing.T) {
	var buf bytes.Buffer
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", "2")
	klog.SetOutput(&buf)
	defer func() {
		_ = fs.Set("v", "0")
		klog.SetOutput(io.Discard)
	}()

	e := NewEngine(Options{})
	rev, err := e.Load(context.Background(), map[string][]byte{
		"lb.rego": []byte("package ccm\n\ndeny contains \"x\" if {\n\tprint(\"type is\", input.load_balancer.type)\n\tfalse\n}\n"),
	}, Source{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.Decide(context.Background(), input.Input{Action: input.ActionLoadBalancerCreate, LoadBalancer: &input.LoadBalancer{Type: "lb21"}})
	klog.Flush()
	want := `"Rego print" location="lb.rego:4" revision="` + rev + `" msg="type is lb21"`
	if !strings.Contains(buf.String(), want) {
		t.Fatalf("log does not contain %s:\n%s", want, buf.String())
	}
}
