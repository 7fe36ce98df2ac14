package hcloudemu

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// action is an asynchronous operation. Its status is computed from the clock:
// running until doneAt, then success (or error when fail is set).
type action struct {
	id        int64
	command   string
	started   time.Time
	doneAt    time.Time
	fail      bool
	resources []schema.ActionResourceReference
}

type failActionKey struct{}

// withFailAction marks a request whose resulting action must end in error.
func withFailAction(ctx context.Context) context.Context {
	return context.WithValue(ctx, failActionKey{}, true)
}

func (a *action) running(now time.Time) bool { return now.Before(a.doneAt) }

// render returns the action as the API shows it at now.
func (a *action) render(now time.Time) schema.Action {
	out := schema.Action{
		ID: a.id, Command: a.command, Started: a.started, Status: "running",
		Resources: slices.Clone(a.resources),
	}
	if a.running(now) {
		return out
	}
	out.Progress = 100
	out.Finished = timePtr(a.doneAt)
	out.Status = "success"
	if a.fail {
		out.Status = "error"
		out.Error = &schema.ActionError{Code: "action_failed", Message: "Action failed"}
	}
	return out
}

// renderStarted returns the action as a mutation reply shows it: always
// running, so clients exercise their wait path even with a zero delay.
func (a *action) renderStarted() schema.Action {
	return schema.Action{
		ID: a.id, Command: a.command, Started: a.started, Status: "running",
		Resources: slices.Clone(a.resources),
	}
}

func lockKey(kind string, id int64) string { return kind + "/" + strconv.FormatInt(id, 10) }

// startAction records a new action on resources; the first resource is
// locked until the action ends. The action fails when the request carries a
// FailAction fault. Callers must not apply their change when the returned
// action fails.
func (e *Emulator) startAction(r *http.Request, command string, resources ...schema.ActionResourceReference) *action {
	now := e.now()
	delay, ok := e.commandDelay[command]
	if !ok {
		delay = e.actionDelay
	}
	a := &action{
		id: e.st.nextID("action"), command: command, started: now, doneAt: now.Add(delay),
		resources: resources,
	}
	if r != nil {
		a.fail, _ = r.Context().Value(failActionKey{}).(bool)
	}
	e.st.actions[a.id] = a
	if len(resources) > 0 {
		e.st.locks[lockKey(resources[0].Type, resources[0].ID)] = a.id
	}
	return a
}

// locked reports whether a running action holds the resource.
func (e *Emulator) locked(kind string, id int64) bool {
	aid, ok := e.st.locks[lockKey(kind, id)]
	if !ok {
		return false
	}
	a := e.st.actions[aid]
	if a == nil || !a.running(e.now()) {
		delete(e.st.locks, lockKey(kind, id))
		return false
	}
	return true
}

// checkLock answers 423 locked while an action runs on the resource.
func (e *Emulator) checkLock(kind string, id int64) *apiError {
	if e.locked(kind, id) {
		return newError(http.StatusLocked, "locked", "%s %d is locked by a running action", kind, id)
	}
	return nil
}

// settle applies the effects of actions that completed since the last
// request: load balancers whose delete action succeeded disappear.
func (e *Emulator) settle() {
	now := e.now()
	for lbID, aid := range e.st.deleting {
		a := e.st.actions[aid]
		if a == nil || a.running(now) {
			continue
		}
		delete(e.st.deleting, lbID)
		if !a.fail {
			delete(e.st.lbs, lbID)
		}
	}
}

func ref(kind string, id int64) schema.ActionResourceReference {
	return schema.ActionResourceReference{ID: id, Type: kind}
}

// listActions serves GET /v1/actions: id is required (repeatable).
func (e *Emulator) listActions(r *http.Request) (int, any, error) {
	q := r.URL.Query()
	ids := q["id"]
	if len(ids) == 0 {
		return 0, nil, errInvalid("id", "at least one action id is required")
	}
	now := e.now()
	var items []listItem
	for _, s := range ids {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, nil, errInvalid("id", "%q is not an integer", s)
		}
		a, ok := e.st.actions[id]
		if !ok || slices.ContainsFunc(items, func(it listItem) bool { return it.id == id }) {
			continue
		}
		rendered := a.render(now)
		items = append(items, listItem{
			id: id, name: rendered.Command, created: a.started,
			status: rendered.Status,
			render: func() any { return rendered },
		})
	}
	return e.list(r, "actions", items, nil)
}

func (e *Emulator) getAction(r *http.Request) (int, any, error) {
	id, err := pathID(r, "action")
	if err != nil {
		return 0, nil, err
	}
	a, ok := e.st.actions[id]
	if !ok {
		return 0, nil, errNotFound("action", id)
	}
	return http.StatusOK, schema.ActionGetResponse{Action: a.render(e.now())}, nil
}

// pathID parses the {id} path value.
func pathID(r *http.Request, kind string) (int64, *apiError) {
	s := r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, newError(http.StatusNotFound, "not_found", "%s with ID '%s' not found", kind, s)
	}
	return id, nil
}

// actionReply is the body of every mutation answered with just an action.
func actionReply(a *action) (int, any, error) {
	return http.StatusCreated, schema.ActionGetResponse{Action: a.renderStarted()}, nil
}
