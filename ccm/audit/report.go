package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// The PolicyReport API (wgpolicyk8s.io/v1alpha2, the shape Kyverno writes, which Policy
// Reporter and `kubectl get policyreport -A` show).
var (
	PolicyReports        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	ClusterPolicyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
)

const (
	// ReportName is the name of the audit's PolicyReport in each namespace and of its
	// ClusterPolicyReport (routes).
	ReportName = "hcloud-policy-ccm-audit"
	// Source is the source of every result.
	Source = "hcloud-policy-ccm"
	// managedBy labels the reports the audit owns; it deletes those without violations.
	managedByKey, managedBy = "app.kubernetes.io/managed-by", "hcloud-policy-ccm"
)

// ErrNoPolicyReportAPI is wrapped when the API server does not serve the PolicyReport API (the
// CRDs are not installed) or the CCM may not use it: the audit logs it once and reports by the
// other channels.
var ErrNoPolicyReportAPI = errors.New("the PolicyReport API is not available")

// ReportWriter writes the violations of an audit where policy tools look.
type ReportWriter interface {
	// Write makes the reports show exactly vs: a result per violation, none for a subject
	// without one.
	Write(ctx context.Context, vs []Violation) error
}

// Reports is the ReportWriter of PolicyReport objects: one PolicyReport ReportName per
// namespace with violating Services, one ClusterPolicyReport ReportName for routes. A report
// without results is deleted; an unchanged one is not written.
type Reports struct {
	Client dynamic.Interface
}

var _ ReportWriter = Reports{}

// Write implements ReportWriter.
//
// # Errors
//
// ErrNoPolicyReportAPI (wrapped) when the CRDs are missing or the CCM is forbidden to use
// them; other API errors wrapped with the report they concern.
func (r Reports) Write(ctx context.Context, vs []Violation) error {
	byNS := map[string][]Violation{}
	var cluster []Violation
	for _, v := range vs {
		if v.Service == nil {
			cluster = append(cluster, v)
			continue
		}
		byNS[v.Service.Namespace] = append(byNS[v.Service.Namespace], v)
	}
	owned, err := r.Client.Resource(PolicyReports).Namespace(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: managedByKey + "=" + managedBy})
	if err != nil {
		return reportErr("list PolicyReports", err)
	}
	var errs []error
	for _, ns := range slices.Sorted(maps.Keys(byNS)) {
		errs = append(errs, r.put(ctx, r.Client.Resource(PolicyReports).Namespace(ns), report("PolicyReport", ns, byNS[ns])))
	}
	for _, item := range owned.Items {
		if _, ok := byNS[item.GetNamespace()]; !ok && item.GetName() == ReportName {
			errs = append(errs, r.remove(ctx, r.Client.Resource(PolicyReports).Namespace(item.GetNamespace())))
		}
	}
	clusterReports := r.Client.Resource(ClusterPolicyReports)
	if len(cluster) > 0 {
		errs = append(errs, r.put(ctx, clusterReports, report("ClusterPolicyReport", "", cluster)))
	} else {
		errs = append(errs, r.remove(ctx, clusterReports))
	}
	return errors.Join(errs...)
}

// put creates want, or updates the report when its results differ.
func (r Reports) put(ctx context.Context, c dynamic.ResourceInterface, want *unstructured.Unstructured) error {
	have, err := c.Get(ctx, ReportName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := c.Create(ctx, want, metav1.CreateOptions{}); err != nil {
			return reportErr("create "+describe(want), err)
		}
		return nil
	case err != nil:
		return reportErr("get "+describe(want), err)
	}
	if equality.Semantic.DeepEqual(have.Object["results"], want.Object["results"]) && equality.Semantic.DeepEqual(have.Object["summary"], want.Object["summary"]) {
		return nil
	}
	have.Object["results"], have.Object["summary"] = want.Object["results"], want.Object["summary"]
	have.SetLabels(want.GetLabels())
	if _, err := c.Update(ctx, have, metav1.UpdateOptions{}); err != nil {
		return reportErr("update "+describe(want), err)
	}
	return nil
}

// remove deletes the report ReportName of c; a missing one is fine.
func (r Reports) remove(ctx context.Context, c dynamic.ResourceInterface) error {
	if err := c.Delete(ctx, ReportName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return reportErr("delete report "+ReportName, err)
	}
	return nil
}

// reportErr wraps err; a missing API (no CRD) or a forbidden one also wraps ErrNoPolicyReportAPI.
func reportErr(op string, err error) error {
	if meta.IsNoMatchError(err) || apierrors.IsForbidden(err) || isMissingResource(err) {
		return fmt.Errorf("%s: %w: %w", op, ErrNoPolicyReportAPI, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isMissingResource reports whether err is the API server's 404 for a resource it does not
// serve (a list or create of a type whose CRD is not installed), not for a missing object.
func isMissingResource(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsNotFound(err) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// report is the report of kind in namespace ns ("" for the cluster report) with the results of
// vs.
func report(kind, ns string, vs []Violation) *unstructured.Unstructured {
	results := make([]any, 0, len(vs))
	summary := map[string]any{"pass": int64(0), "fail": int64(0), "warn": int64(0), "error": int64(0), "skip": int64(0)}
	for _, v := range vs {
		results = append(results, result(v))
		summary[v.Result] = summary[v.Result].(int64) + 1
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": PolicyReports.GroupVersion().String(),
		"kind":       kind,
		"metadata": map[string]any{
			"name":   ReportName,
			"labels": map[string]any{managedByKey: managedBy},
		},
		"summary": summary,
		"results": results,
	}}
	if ns != "" {
		u.SetNamespace(ns)
	}
	return u
}

// result is one PolicyReport result for v: the rule's code as policy and rule, the message,
// fail or warn, and the Service (or Node) as the resource.
func result(v Violation) map[string]any {
	res := map[string]any{
		"source":  Source,
		"policy":  v.Rule(),
		"rule":    v.Rule(),
		"message": v.Message,
		"result":  v.Result,
		"scored":  true,
	}
	props := map[string]any{"steps": strings.Join(v.Steps, ", ")}
	if v.Service != nil {
		res["category"] = "Hetzner Cloud load balancer"
		res["resources"] = []any{map[string]any{
			"apiVersion": "v1", "kind": "Service", "namespace": v.Service.Namespace, "name": v.Service.Name, "uid": string(v.Service.UID),
		}}
	} else {
		res["category"] = "Hetzner Cloud route"
		res["resources"] = []any{map[string]any{"apiVersion": "v1", "kind": "Node", "name": v.Node}}
		props["route"] = v.Route
	}
	res["properties"] = props
	return res
}
