package executor

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/policy-ccm/hcloud-policy-ccm/ccm/apireq"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/lbplan"
	"github.com/policy-ccm/hcloud-policy-ccm/ccm/routeplan"
)

// ErrRefused is wrapped by the error of a plan or request the executor refused to send because
// it is not what the policy decided: a mutation of a type that is not a registered kind, or a
// request whose endpoint (apireq.Of) is not the mutation's action and operation, or that
// changes another load balancer or network than the one decided on. Nothing of it is sent.
// A refusal is a bug of the CCM, never a policy decision: it is logged as an error and counted
// as hcloud_ccm_mutations_total{result="refused"}.
var ErrRefused = errors.New("refused before sending, not what the policy decided")

// step is a mutation of either planner as the gate decides it: the action and operation of its
// policy input (Inputs and RouteInputs take them from the mutation) and its label.
type step interface {
	Action() string
	Operation() string
	Label() string
}

// kinds are the exact dynamic types of the registered mutation kinds (lbplan.Kinds,
// routeplan.Kinds); built once, after every init of lbplan has registered its kinds.
var kinds = sync.OnceValue(func() map[reflect.Type]bool {
	out := map[reflect.Type]bool{}
	for _, k := range lbplan.Kinds() {
		out[reflect.TypeOf(k)] = true
	}
	for _, k := range routeplan.Kinds() {
		out[reflect.TypeOf(k)] = true
	}
	return out
})

// vetKinds refuses (ErrRefused) a plan with a mutation whose exact dynamic type is not a
// registered kind: a type that embeds lbplan.AddTarget, or a pointer to one, is not an
// AddTarget, and its Request is not lbplan's.
func vetKinds[M step](ms []M) error {
	for _, m := range ms {
		if !kinds()[reflect.TypeOf(m)] {
			if reflect.TypeOf(m) == nil {
				return fmt.Errorf("a nil mutation: %w", ErrRefused)
			}
			return refuse(m, "its type %T is not a registered kind (lbplan.Kinds, routeplan.Kinds)", m)
		}
	}
	return nil
}

// vetRequest refuses (ErrRefused) api, the request of m, unless its method and path are an
// endpoint of apireq.Endpoints with m's action and operation (what the gate decided) and,
// when the endpoint's path has an ID, the ID is decided: the load balancer or network the
// policy decided on.
func vetRequest(m step, api apireq.Request, decided int64) error {
	ep, id, ok := apireq.Of(api.Method, api.Path)
	switch {
	case !ok:
		return refuse(m, "%s %s is no endpoint the CCM writes to (apireq.Endpoints)", api.Method, api.Path)
	case ep.Action != m.Action() || ep.Operation != m.Operation():
		return refuse(m, "%s %s is %s/%s, the policy decided %s/%s", api.Method, api.Path, ep.Action, ep.Operation, m.Action(), m.Operation())
	case strings.Contains(ep.Pattern, "%d") && id != decided:
		return refuse(m, "%s %s changes %d, the policy decided on %d", api.Method, api.Path, id, decided)
	}
	return nil
}

// refuse logs and counts the refusal of m and returns its error.
func refuse(m step, format string, args ...any) error {
	err := fmt.Errorf("%s: %w: %s", m.Label(), ErrRefused, fmt.Sprintf(format, args...))
	klog.ErrorS(err, "Refused to send a request that is not what the policy decided; this is a bug of the CCM", "op", m.Label())
	countMutation(m.Action(), m.Operation(), resultRefused)
	return err
}
