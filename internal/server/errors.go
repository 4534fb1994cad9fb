package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/mlxcel/mlxcel/internal/chat"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/sample"
)

// Error types of the OpenAI error body. Clients (the OpenAI SDKs among
// them) branch on the HTTP status; type and code refine it.
const (
	typeInvalid     = "invalid_request_error"
	typeAuth        = "authentication_error"
	typeNotFound    = "not_found_error"
	typeRateLimit   = "rate_limit_error"
	typeUnavailable = "unavailable_error"
	typeServer      = "server_error"
)

// apiError is one failed request: the status and the OpenAI error body
// {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	status     int
	msg        string
	typ        string
	param      string
	code       string
	retryAfter int // seconds; sent as Retry-After when > 0
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: typeInvalid, param: param, msg: fmt.Sprintf(format, args...)}
}

func serverError(format string, args ...any) *apiError {
	return &apiError{status: http.StatusInternalServerError, typ: typeServer, msg: fmt.Sprintf(format, args...)}
}

func loadingError() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, code: "model_loading", msg: "Loading model"}
}

func modelNotFound(name string) *apiError {
	return &apiError{status: http.StatusNotFound, typ: typeInvalid, param: "model", code: "model_not_found",
		msg: fmt.Sprintf("The model `%s` does not exist.", name)}
}

// errorBody is the JSON shape; param and code are null when unset, as the
// OpenAI API sends them.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type = e.msg, e.typ
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = &e.code
	}
	return b
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeJSON(w, e.status, e.body())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// submitError maps what engine.Submit (through generate.Run) refuses to
// the status a client can act on: 429 means "retry later", 400 "fix the
// request", 503 "this server is going away".
func submitError(err error, maxContext int) *apiError {
	switch {
	case errors.Is(err, engine.ErrQueueFull):
		return &apiError{status: http.StatusTooManyRequests, typ: typeRateLimit, code: "queue_full", retryAfter: 1,
			msg: "The server is at capacity: too many requests are running and queued. Retry later."}
	case errors.Is(err, engine.ErrPromptTooLong):
		return badRequest("max_tokens", "This model's maximum context length is %d tokens; the prompt plus max_tokens exceed it (%v).",
			maxContext, err)
	case errors.Is(err, engine.ErrInvalidRequest):
		return badRequest("", "%v", err)
	case errors.Is(err, engine.ErrStopped):
		return &apiError{status: http.StatusServiceUnavailable, typ: typeUnavailable, code: "shutting_down", msg: "The server is shutting down."}
	}
	return serverError("%v", err)
}

// paramError turns a sampling parameter out of range into a 400 naming it.
func paramError(err error) *apiError {
	var pe *sample.ParamError
	if errors.As(err, &pe) {
		return badRequest(pe.Param, "%s %s", pe.Param, pe.Msg)
	}
	return badRequest("", "%v", err)
}

// templateError: a template that raises rejects the conversation; any
// other render failure is still a 400 with the template's message: the
// conversation is what the template cannot handle (a null content it
// does not expect, say), and a 5xx would only make SDKs retry it.
func templateError(err error) *apiError {
	var re *chat.RaiseError
	if errors.As(err, &re) {
		return badRequest("messages", "%s", re.Message)
	}
	return badRequest("messages", "The model's chat template failed on this conversation: %v", err)
}

// templateLoadError: the model's template did not parse at load.
func templateLoadError(err error) *apiError {
	return badRequest("messages", "The model's chat template failed to load, so it cannot take chat requests "+
		"(/v1/completions still works): %v", err)
}
