package loadbalancer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/annotation"
)

// TestPreview_NoWrite: Preview plans what EnsureLoadBalancer would run, with reads only, no
// event and no decision; after the load balancer exists, the same Service previews empty and a
// changed one previews the change; PreviewDelete plans the delete.
func TestPreview_NoWrite(t *testing.T) {
	ctx := context.Background()
	ev := newEnv(t)
	svc := newService("web", withPorts(80))

	plan, err := ev.lbs.Preview(ctx, clusterName, svc, ev.nodes, nil)
	if err != nil {
		t.Fatalf("Preview of a create: %v", err)
	}
	if plan.Empty() || plan.Steps()[0].Mutation.Operation() != "create" {
		t.Errorf("Preview of a new Service = %v, want a create first", plan.Labels())
	}
	if n := ev.emu.MutatingRequests(); n != 0 {
		t.Errorf("Preview made %d mutating requests: %v", n, ev.emu.Counts())
	}
	if len(ev.decider.inputs) != 0 {
		t.Errorf("Preview decided %d inputs; deciding is the caller's", len(ev.decider.inputs))
	}
	if e := ev.events(); len(e) != 0 {
		t.Errorf("Preview recorded events %v", e)
	}

	ev.mustEnsure(svc)
	ev.events()
	ev.emu.ResetRequests()
	if plan, err := ev.lbs.Preview(ctx, clusterName, svc, ev.nodes, nil); err != nil || !plan.Empty() {
		t.Errorf("Preview of an unchanged Service = %v, %v; want empty", plan.Labels(), err)
	}
	changed := newService("web", withPorts(80, 443))
	plan, err = ev.lbs.Preview(ctx, clusterName, changed, ev.nodes, nil)
	if err != nil || len(plan.Mutations) != 1 || plan.Steps()[0].Mutation.Operation() != "add_service" {
		t.Errorf("Preview of a new port = %v, %v; want one add_service", plan.Labels(), err)
	}
	plan, err = ev.lbs.PreviewDelete(ctx, clusterName, svc)
	if err != nil || len(plan.Mutations) != 1 || plan.Steps()[0].Mutation.Operation() != "delete" {
		t.Errorf("PreviewDelete = %v, %v; want one delete", plan.Labels(), err)
	}
	if n := ev.emu.MutatingRequests(); n != 0 {
		t.Errorf("previews made %d mutating requests: %v", n, ev.emu.Counts())
	}
	if e := ev.events(); len(e) != 0 {
		t.Errorf("previews recorded events %v", e)
	}
	if len(ev.onlyLB().Services) != 1 {
		t.Errorf("the load balancer changed")
	}
}

// TestPreview_BadAnnotation: a bad annotation is the same user error EnsureLoadBalancer
// returns, without the InvalidAnnotation event.
func TestPreview_BadAnnotation(t *testing.T) {
	ev := newEnv(t)
	svc := newService("web", withPorts(80), withAnnotation(annotation.LBAlgorithmType, "fastest"))
	_, err := ev.lbs.Preview(context.Background(), clusterName, svc, ev.nodes, nil)
	var ie *annotation.InvalidError
	if !errors.As(err, &ie) || ie.Name != annotation.LBAlgorithmType {
		t.Errorf("Preview error = %v, want an *annotation.InvalidError naming %s", err, annotation.LBAlgorithmType)
	}
	if e := ev.events(); len(e) != 0 {
		t.Errorf("Preview recorded events %v", e)
	}
}
