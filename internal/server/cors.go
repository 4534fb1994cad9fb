package server

import (
	"net/http"
	"strings"
)

// cors answers browsers for the origins of --allowed-origins (off when
// none is given): preflight OPTIONS requests get the Access-Control-Allow-*
// headers before authentication (a browser never sends credentials on a
// preflight), and every response to an allowed origin carries
// Access-Control-Allow-Origin. Foreign origins never get here: guard
// refuses them (origin.go).
func (s *Server) cors(next http.Handler) http.Handler {
	if len(s.opts.AllowedOrigins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !originAllowed(origin, r.Host, s.opts.AllowedOrigins) {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		// The origin itself, not "*", so a client sending credentials is
		// served too; Vary keeps shared caches from mixing origins.
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "Retry-After, WWW-Authenticate")
		if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
			next.ServeHTTP(w, r)
			return
		}
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		allow := r.Header.Get("Access-Control-Request-Headers")
		if strings.TrimSpace(allow) == "" {
			allow = "Authorization, Content-Type"
		}
		h.Set("Access-Control-Allow-Headers", allow)
		h.Set("Access-Control-Max-Age", "86400")
		h.Add("Vary", "Access-Control-Request-Method")
		h.Add("Vary", "Access-Control-Request-Headers")
		w.WriteHeader(http.StatusNoContent)
	})
}
