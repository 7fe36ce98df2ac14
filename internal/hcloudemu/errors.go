package hcloudemu

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// apiError is an error answered as {"error":{code,message,details}}.
type apiError struct {
	status  int
	code    string
	message string
	details any
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%s, %d)", e.message, e.code, e.status) }

// fieldError is one entry of details.fields of an invalid_input error.
type fieldError struct {
	Name     string   `json:"name"`
	Messages []string `json:"messages"`
}

func newError(status int, code, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func errNotFound(kind string, id any) *apiError {
	return newError(http.StatusNotFound, "not_found", "%s with ID '%v' not found", kind, id)
}

// errInvalid answers 422 invalid_input naming one field.
func errInvalid(field, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	return &apiError{
		status:  http.StatusUnprocessableEntity,
		code:    "invalid_input",
		message: fmt.Sprintf("invalid input in field '%s'", field),
		details: map[string]any{"fields": []fieldError{{Name: field, Messages: []string{msg}}}},
	}
}

func errLocked() *apiError {
	return newError(http.StatusLocked, "locked", "resource is locked by a running action")
}

func errConflict() *apiError {
	return newError(http.StatusConflict, "conflict", "another change is in progress on the resource")
}

// writeJSON answers v as JSON with status; every JSON reply carries
// Content-Type application/json, which hcloud-go needs to parse errors and
// pagination.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"server_error","message":"encode response","details":{}}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, e *apiError) {
	details := e.details
	if details == nil {
		details = map[string]any{}
	}
	writeJSON(w, e.status, map[string]any{"error": map[string]any{
		"code": e.code, "message": e.message, "details": details,
	}})
}
