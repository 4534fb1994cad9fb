package server

import (
	"encoding/json"
	"net/http"
)

// sse writes a server-sent event stream of JSON chunks, OpenAI style:
// "data: {...}\n\n" per chunk, flushed at once, ending with "data: [DONE]".
//
// Headers go out with the first chunk, not before: until then a request
// that the engine refuses (queue full) can still get its proper status.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
	buf     []byte
}

func newSSE(w http.ResponseWriter) *sse {
	return &sse{w: w, rc: http.NewResponseController(w)}
}

func (s *sse) start() {
	if s.started {
		return
	}
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	// Proxies such as nginx buffer responses unless told otherwise, which
	// would hold tokens back.
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// send writes one chunk. A write error means the client is gone; the
// caller returns it from its emit callback, which cancels generation.
func (s *sse) send(v any) error {
	s.start()
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.buf = append(append(append(s.buf[:0], "data: "...), b...), "\n\n"...)
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

// fail ends a started stream with an error event, as vLLM does; the
// status line has gone out already.
func (s *sse) fail(e *apiError) {
	s.send(e.body())
	s.done()
}

func (s *sse) done() error {
	s.start()
	if _, err := s.w.Write([]byte("data: [DONE]\n\n")); err != nil {
		return err
	}
	return s.rc.Flush()
}
