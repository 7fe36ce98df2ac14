//go:build soak

package soak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/policy-ccm/hcloud-policy-ccm/internal/hcloudemu"
)

// fault is one kind of fault: a name, a weight and a function that injects it and says what it
// did ("" when it does not apply now). Faults of the emulator last until the round's window
// ends (ClearFaults); a stopped replica is started again then.
type fault struct {
	name   string
	weight int
	run    func(s *soak) (string, error)
}

// faults are the faults the soak draws from.
var faults = []fault{
	{"api-5xx", 3, emuFault("30% of requests answer 503", hcloudemu.Fault{Status: http.StatusServiceUnavailable, Probability: 0.3})},
	{"api-429", 3, emuFault("half of the requests answer 429", hcloudemu.Fault{Code: "rate_limit_exceeded", Probability: 0.5})},
	{"failed-actions", 3, emuFault("half of the load balancer actions fail", hcloudemu.Fault{Method: http.MethodPost, Pattern: "/v1/load_balancers/*/actions/*", FailAction: true, Probability: 0.5})},
	{"create-committed-500", 2, emuFault("the next load balancer create is applied, then answered 500", hcloudemu.Fault{Method: http.MethodPost, Pattern: "/v1/load_balancers", AfterCommit: true, Status: http.StatusInternalServerError, Times: 1})},
	{"dropped-replies", 2, emuFault("15% of the connections are closed without a reply", hcloudemu.Fault{Drop: true, Probability: 0.15})},
	{"hung-replies", 1, emuFault("10% of the writes are applied and answered after 5 s", hcloudemu.Fault{Method: http.MethodPost, AfterCommit: true, Delay: 5 * time.Second, Probability: 0.1})},
	{"lb-deleted-by-hand", 3, (*soak).handDeleteLB},
	{"listener-deleted-by-hand", 2, (*soak).handDeleteListener},
	{"target-removed-by-hand", 2, (*soak).handRemoveTarget},
	{"leader-sigkill", 2, func(s *soak) (string, error) { return s.stopLeader(true) }},
	{"leader-sigterm", 2, func(s *soak) (string, error) { return s.stopLeader(false) }},
	{"standby-sigkill", 1, (*soak).killStandby},
}

// emuFault returns a fault that adds f to the emulator.
func emuFault(what string, f hcloudemu.Fault) func(*soak) (string, error) {
	return func(s *soak) (string, error) {
		s.emu.AddFault(f)
		return what, nil
	}
}

// randomLB returns a load balancer of the cloud at random that matches keep.
func (s *soak) randomLB(keep func(lbView) bool) (lbView, bool) {
	var lbs []lbView
	for _, lb := range s.cloud() {
		if keep(lb) {
			lbs = append(lbs, lb)
		}
	}
	if len(lbs) == 0 {
		return lbView{}, false
	}
	sort.Slice(lbs, func(i, j int) bool { return lbs[i].ID < lbs[j].ID })
	return lbs[s.rnd.IntN(len(lbs))], true
}

// handDeleteLB deletes a load balancer by hand: a group's half the time (a group's load
// balancer lost while refused members remain is where a home was re-derived, issue 40 §3).
func (s *soak) handDeleteLB() (string, error) {
	lb, ok := s.randomLB(func(lb lbView) bool { return lb.Labels[labelGroup] != "" })
	if !ok || s.rnd.IntN(2) == 0 {
		lb, ok = s.randomLB(func(lbView) bool { return true })
	}
	if !ok {
		return "", nil
	}
	if err := s.hand(http.MethodDelete, fmt.Sprintf("/load_balancers/%d", lb.ID), nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("deleted load balancer %d (%s) by hand", lb.ID, lb.Name), nil
}

func (s *soak) handDeleteListener() (string, error) {
	lb, ok := s.randomLB(func(lb lbView) bool { return len(lb.Listeners) > 0 })
	if !ok {
		return "", nil
	}
	port := lb.Listeners[s.rnd.IntN(len(lb.Listeners))].Listen
	if err := s.hand(http.MethodPost, fmt.Sprintf("/load_balancers/%d/actions/delete_service", lb.ID), map[string]any{"listen_port": port}); err != nil {
		return "", err
	}
	return fmt.Sprintf("deleted listener %d of load balancer %d (%s) by hand", port, lb.ID, lb.Name), nil
}

func (s *soak) handRemoveTarget() (string, error) {
	lb, ok := s.randomLB(func(lb lbView) bool { return len(lb.Targets) > 0 })
	if !ok {
		return "", nil
	}
	id := lb.Targets[s.rnd.IntN(len(lb.Targets))]
	body := map[string]any{"type": "server", "server": map[string]any{"id": id}}
	if err := s.hand(http.MethodPost, fmt.Sprintf("/load_balancers/%d/actions/remove_target", lb.ID), body); err != nil {
		return "", err
	}
	return fmt.Sprintf("removed target server %d of load balancer %d (%s) by hand", id, lb.ID, lb.Name), nil
}

// hand sends one request to the API as an operator would, through the soak's own endpoint.
// Hand edits are made before the round's emulator faults are added, so they do not fail.
func (s *soak) hand(method, path string, body any) error {
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("hand %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, s.eps["hand"].URL+path, rd)
	if err != nil {
		return fmt.Errorf("hand %s %s: %w", method, path, err)
	}
	req.Header.Set("Authorization", "Bearer "+s.emu.Token())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("hand %s %s: %w", method, path, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("hand %s %s: %s", method, path, resp.Status)
	}
	return nil
}

// stopLeader stops the replica that leads (SIGKILL or SIGTERM); the standby takes over, and
// the stopped one is started again when the round's window ends.
func (s *soak) stopLeader(kill bool) (string, error) {
	for _, name := range []string{"a", "b"} {
		r := s.replicas[name]
		if r.leads() {
			r.stop(kill)
			return fmt.Sprintf("stopped the leader %s (kill=%v)", r.Name, kill), nil
		}
	}
	return "", nil
}

func (s *soak) killStandby() (string, error) {
	for _, name := range []string{"a", "b"} {
		r := s.replicas[name]
		if r.alive() && !r.leads() {
			r.stop(true)
			return fmt.Sprintf("killed the standby %s", r.Name), nil
		}
	}
	return "", nil
}
