package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Browser safety. A server without an API key (the default) on
// 127.0.0.1 can otherwise be driven by any web page the user opens:
// cross-site POSTs with a text/plain body need no CORS preflight. Browsers
// send an Origin header on every such request, curl and the SDKs none, so
// a request whose Origin is neither the server's own (its web page) nor
// listed in --allowed-origins is refused with 403. --allowed-hosts also
// checks the Host header, which is what defeats DNS rebinding (the
// attacker's page is then same-origin under the attacker's host name).

func originError(origin string) *apiError {
	return &apiError{status: http.StatusForbidden, typ: typeInvalid, code: "origin_not_allowed",
		msg: "Requests from the web origin " + origin + " are not allowed; start the server with --allowed-origins to permit it."}
}

func hostError(host string) *apiError {
	return &apiError{status: http.StatusForbidden, typ: typeInvalid, code: "host_not_allowed",
		msg: "The Host " + host + " is not among the server's --allowed-hosts."}
}

// checkOrigin refuses a foreign Origin or, with --allowed-hosts, a Host
// that is not listed.
func (s *Server) checkOrigin(r *http.Request) *apiError {
	if len(s.opts.AllowedHosts) > 0 && !hostAllowed(r.Host, s.opts.AllowedHosts) {
		return hostError(r.Host)
	}
	origin := r.Header.Get("Origin")
	if origin == "" || originAllowed(origin, r.Host, s.opts.AllowedOrigins) {
		return nil
	}
	return originError(origin)
}

// originAllowed: the server's own origin (scheme://Host of the request)
// always, "*" any, otherwise an exact entry (case-insensitive, a trailing
// slash ignored).
func originAllowed(origin, host string, allowed []string) bool {
	o := strings.TrimSuffix(strings.ToLower(origin), "/")
	if u, err := url.Parse(o); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" &&
		strings.EqualFold(u.Host, host) {
		return true
	}
	for _, a := range allowed {
		if a == "*" || strings.TrimSuffix(strings.ToLower(strings.TrimSpace(a)), "/") == o {
			return true
		}
	}
	return false
}

// hostAllowed compares the Host header's name (the port ignored) with the
// list; "*" allows any.
func hostAllowed(host string, allowed []string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(strings.ToLower(name), "[]")
	for _, a := range allowed {
		a = strings.Trim(strings.ToLower(strings.TrimSpace(a)), "[]")
		if a == "*" || a == name {
			return true
		}
	}
	return false
}

// splitList reads a comma-separated flag value.
func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
