package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mlxcel/mlxcel/internal/webui"
)

// Request outcomes, the "outcome" label of mlxcel_requests_total. A
// generation request ends as its finish reason (stop, length), cancelled
// (the client went away), error (the engine failed), rejected (429 queue
// full, 503 loading or shutting down) or invalid (any other 4xx).
const (
	outcomeCancelled = "cancelled"
	outcomeError     = "error"
	outcomeRejected  = "rejected"
	outcomeInvalid   = "invalid"
)

func outcomeOf(e *apiError) string {
	switch {
	case e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable:
		return outcomeRejected
	case e.status == 499:
		return outcomeCancelled
	case e.status >= 500:
		return outcomeError
	}
	return outcomeInvalid
}

// reject answers e and returns its outcome.
func (s *Server) reject(w http.ResponseWriter, e *apiError) string {
	if e.status != 499 { // nobody is listening for a 499
		writeError(w, e)
	}
	return outcomeOf(e)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	counted := func(h func(http.ResponseWriter, *http.Request) string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			s.metrics.requests.WithLabelValues(h(w, r)).Inc()
		}
	}
	mux.HandleFunc("POST /v1/chat/completions", counted(s.handleChat))
	mux.HandleFunc("POST /v1/completions", counted(s.handleCompletion))
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.handleModel)
	mux.HandleFunc("POST /v1/messages", counted(s.handleMessages))
	mux.HandleFunc("POST /v1/messages/count_tokens", s.handleCountTokens)
	mux.HandleFunc("POST /v1/responses", counted(s.handleResponses))
	mux.HandleFunc("GET /v1/responses/{id}", s.handleGetResponse)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}))
	// The same paths with another method: 405 in the OpenAI error shape
	// (the mux's own answer is plain text).
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/tokenize", "/detokenize", "/metrics"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			writeError(w, &apiError{status: http.StatusMethodNotAllowed, typ: typeInvalid,
				msg: "Method " + r.Method + " is not allowed on " + r.URL.Path + "."})
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, typ: typeNotFound, msg: "No endpoint " + r.URL.Path + "."})
	})
	return s.logRequests(s.guard(s.cors(webui.Wrap(s.auth(mux)))))
}

// auth requires the API key on everything but /health and /metrics, which
// probes and scrapers call without credentials (as with vLLM).
func (s *Server) auth(next http.Handler) http.Handler {
	if s.opts.APIKey == "" {
		return next
	}
	// Comparing fixed-size hashes in constant time leaks neither the key's
	// content nor its length through timing.
	want := sha256.Sum256([]byte(s.opts.APIKey))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/metrics" {
			next.ServeHTTP(w, r)
			return
		}
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if x := r.Header.Get("X-Api-Key"); !ok && x != "" {
			key, ok = x, true // Anthropic clients send x-api-key
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(key)))
		if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mlxcel"`)
			e := &apiError{status: http.StatusUnauthorized, typ: typeAuth, code: "invalid_api_key",
				msg: "Incorrect or missing API key: send it as 'Authorization: Bearer <key>'."}
			if strings.HasPrefix(r.URL.Path, "/v1/messages") {
				w.Header().Set("Connection", "close")
				writeAnthError(w, e) // Anthropic clients read their own shape
				return
			}
			s.refuse(w, e)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// statusWriter records the status for the access log. It passes Flush
// through (http.ResponseController finds it via Unwrap).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequests writes one line per request (never per token).
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status == 0 && r.Context().Err() != nil {
			sw.status = 499 // the client went away before an answer (nginx's code)
		}
		if r.URL.Path == "/health" || r.URL.Path == "/metrics" {
			return // probes and scrapes would drown the log
		}
		s.log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.status,
			"ms", time.Since(start).Milliseconds(), "remote", r.RemoteAddr)
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if overflowConn(r.Context()) {
		w.Header().Set("Connection", "close")
	}
	switch {
	case s.draining.Load():
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	case s.model() == nil:
		writeError(w, loadingError())
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}
}

type modelInfo struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	MaxModelLen int    `json:"max_model_len"`
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	m := s.model()
	if m == nil {
		writeError(w, loadingError())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   []modelInfo{{ID: m.name, Object: "model", Created: m.created, OwnedBy: "mlxcel", MaxModelLen: m.eng.MaxContext()}},
	})
}

// newID is a response id: prefix and 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
