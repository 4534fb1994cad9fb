// Package webui is the chat page `mlxcel serve` answers at /: plain
// HTML, CSS and JavaScript embedded in the binary (no build step), talking
// to the server's own /v1/chat/completions with streaming. The page and
// its assets need no API key (a browser cannot send one on navigation);
// the API calls it makes carry the key the user types into it.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Prefix is where the page's assets are served.
const Prefix = "/ui/"

// Handler serves the page at / and its assets under Prefix.
func Handler() http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.StripPrefix(Prefix, http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		// The page runs only its own scripts and talks only to its origin.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
		w.Header().Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" {
			b, _ := static.ReadFile("static/index.html")
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(b)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// Wrap answers GET and HEAD of the page and its assets itself and passes
// every other request to next (the API, behind its authentication).
func Wrap(next http.Handler) http.Handler {
	page := Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, Prefix)) {
			page.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
