// Package hubtest is a local server speaking the Hugging Face Hub protocol
// for tests: the revision API, resolve URLs, and a CDN for large files.
package hubtest

import (
	"bytes"
	"cmp"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server speaks the part of the Hub protocol huggingface_hub uses: the
// revision API, resolve URLs answering HEAD and GET, large (LFS) files
// redirected to a separate CDN server that honours Range. Knobs break it
// the ways a real network does.
// Server is the fake Hub; the exported maps are knobs and records.
type Server struct {
	t     testing.TB
	Hub   *httptest.Server
	CDN   *httptest.Server
	Repos map[string]*Repo
	Token string // required for gated repos

	mu        sync.Mutex
	Drops     map[string]int      // file -> transfers to break off half way
	Corrupt   map[string]int      // file -> transfers to send with a flipped byte
	CDNGets   map[string]int      // file -> GETs the CDN served
	Ranges    map[string][]string // file -> Range headers the CDN saw
	CDNAuth   []string            // Authorization headers the CDN saw
	SlowBytes time.Duration       // delay per 4 KiB chunk on the CDN
}

// Repo is a published repository at one commit.
type Repo struct {
	SHA   string
	Files map[string][]byte
	LFS   map[string]bool
	Gated bool
	// Forbidden answers 403 even with the token: a gated repository whose
	// conditions the token's account has not accepted.
	Forbidden bool
	// Commit, when set, is sent as X-Repo-Commit instead of SHA.
	Commit string
}

// New starts a Hub and a CDN server, closed when the test ends.
func New(t testing.TB) *Server {
	f := &Server{t: t, Repos: map[string]*Repo{}, Drops: map[string]int{}, Corrupt: map[string]int{}, CDNGets: map[string]int{}, Ranges: map[string][]string{}}
	f.CDN = httptest.NewServer(http.HandlerFunc(f.serveCDN))
	f.Hub = httptest.NewServer(http.HandlerFunc(f.serveHub))
	t.Cleanup(func() { f.Close() })
	return f
}

// Add publishes a repository; files named in lfs are served from the CDN.
func (f *Server) Add(repo string, files map[string][]byte, lfs ...string) *Repo {
	h := sha1.Sum([]byte(repo))
	r := &Repo{SHA: hex.EncodeToString(h[:]), Files: files, LFS: map[string]bool{}}
	for _, n := range lfs {
		r.LFS[n] = true
	}
	f.Repos[repo] = r
	return r
}

// GitSHA1 is the ETag the Hub gives a file git stores itself.
func GitSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256Hex is the ETag of an LFS file.
func SHA256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func (f *Server) authorized(r *http.Request, repo *Repo) bool {
	return !repo.Gated || r.Header.Get("Authorization") == "Bearer "+f.Token
}

func (f *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	p := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	if len(p) == 6 && p[0] == "api" && p[1] == "models" && p[4] == "revision" {
		f.serveInfo(w, r, p[2]+"/"+p[3], p[5])
		return
	}
	if len(p) >= 5 && p[2] == "resolve" {
		f.serveResolve(w, r, p[0]+"/"+p[1], p[3], strings.Join(p[4:], "/"))
		return
	}
	http.NotFound(w, r)
}

func (f *Server) repo(w http.ResponseWriter, r *http.Request, name, rev string) *Repo {
	repo := f.Repos[name]
	switch {
	case repo == nil:
		// The Hub answers 401 to anonymous requests for unknown repos and
		// 404 to authenticated ones; the tests use 404 for "unknown".
		w.Header().Set("X-Error-Code", "RepoNotFound")
		http.Error(w, "Repository not found", http.StatusNotFound)
	case !f.authorized(r, repo):
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "Access to model is restricted", http.StatusUnauthorized)
	case repo.Forbidden:
		w.Header().Set("X-Error-Code", "GatedRepo")
		http.Error(w, "Access to model is restricted: accept the conditions", http.StatusForbidden)
	case rev != "main" && rev != repo.SHA:
		w.Header().Set("X-Error-Code", "RevisionNotFound")
		http.Error(w, "Invalid rev id", http.StatusNotFound)
	default:
		return repo
	}
	return nil
}

func (f *Server) serveInfo(w http.ResponseWriter, r *http.Request, name, rev string) {
	repo := f.repo(w, r, name, rev)
	if repo == nil {
		return
	}
	type sib struct {
		RFilename string `json:"rfilename"`
	}
	info := struct {
		ID       string `json:"id"`
		SHA      string `json:"sha"`
		Siblings []sib  `json:"siblings"`
	}{ID: name, SHA: repo.SHA}
	for n := range repo.Files {
		info.Siblings = append(info.Siblings, sib{n})
	}
	json.NewEncoder(w).Encode(info)
}

func (f *Server) serveResolve(w http.ResponseWriter, r *http.Request, name, rev, file string) {
	repo := f.repo(w, r, name, rev)
	if repo == nil {
		return
	}
	b, ok := repo.Files[file]
	if !ok {
		w.Header().Set("X-Error-Code", "EntryNotFound")
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	w.Header().Set("X-Repo-Commit", cmp.Or(repo.Commit, repo.SHA))
	if repo.LFS[file] {
		// The ETag of the redirect is the pointer file's; the content's
		// sha256 and size come as X-Linked-*.
		w.Header().Set("ETag", `"`+GitSHA1([]byte("pointer:"+file))+`"`)
		w.Header().Set("X-Linked-Etag", `"`+SHA256Hex(b)+`"`)
		w.Header().Set("X-Linked-Size", fmt.Sprint(len(b)))
		http.Redirect(w, r, f.CDN.URL+"/"+name+"/"+file, http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+GitSHA1(b)+`"`)
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	if r.Method == http.MethodGet {
		w.Write(b)
	}
}

func (f *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	p := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	repo := f.Repos[p[0]+"/"+p[1]]
	if repo == nil {
		http.NotFound(w, r)
		return
	}
	file := p[2]
	b := repo.Files[file]
	f.mu.Lock()
	f.CDNGets[file]++
	f.Ranges[file] = append(f.Ranges[file], r.Header.Get("Range"))
	f.CDNAuth = append(f.CDNAuth, r.Header.Get("Authorization"))
	drop := f.Drops[file] > 0
	if drop {
		f.Drops[file]--
	}
	bad := f.Corrupt[file] > 0
	if bad {
		f.Corrupt[file]--
		b = append([]byte(nil), b...)
		b[len(b)/3] ^= 0xff
	}
	slow := f.SlowBytes
	f.mu.Unlock()
	if drop {
		f.breakOff(w, r, b)
		return
	}
	if slow > 0 {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		for i := 0; i < len(b); i += 4096 {
			w.Write(b[i:min(i+4096, len(b))])
			time.Sleep(slow)
		}
		return
	}
	http.ServeContent(w, r, file, time.Time{}, bytes.NewReader(b))
}

// breakOff promises the whole (remaining) file, sends half and closes the
// connection, as a dropped link does.
func (f *Server) breakOff(w http.ResponseWriter, r *http.Request, b []byte) {
	start := 0
	if rg := r.Header.Get("Range"); rg != "" {
		fmt.Sscanf(rg, "bytes=%d-", &start)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(b)-1, len(b)))
		w.Header().Set("Content-Length", fmt.Sprint(len(b)-start))
		w.WriteHeader(http.StatusPartialContent)
	} else {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	}
	rest := b[start:]
	w.Write(rest[:len(rest)/2])
	w.(http.Flusher).Flush()
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		f.t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

// URL is the Hub endpoint (HF_ENDPOINT).
func (f *Server) URL() string { return f.Hub.URL }

// Close stops the Hub and its CDN.
func (f *Server) Close() { f.Hub.Close(); f.CDN.Close() }
