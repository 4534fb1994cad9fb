// Package hub downloads model repositories from the Hugging Face Hub into
// the cache layout huggingface_hub uses, so files fetched by
// huggingface-cli or mlx-lm are reused here and the other way round
// (docs/hub.md).
package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// DefaultEndpoint is the public Hub.
const DefaultEndpoint = "https://huggingface.co"

// DefaultOrg is where a bare model name is looked up, as mlx-lm users
// name models ("Qwen3-4B-4bit" is mlx-community/Qwen3-4B-4bit).
const DefaultOrg = "mlx-community"

// Client talks to one Hub endpoint and one cache folder.
type Client struct {
	Endpoint string // no trailing slash
	Token    string // sent as Authorization: Bearer; empty: anonymous
	Cache    string // the hub cache folder (models--ORG--NAME/ live here)
	Offline  bool   // HF_HUB_OFFLINE: never touch the network
	HTTP     *http.Client

	// Attempts per file (network errors, 5xx, 429 and checksum mismatches
	// are retried) and the first delay between them, doubled each time.
	Attempts int
	Backoff  time.Duration

	// Log receives progress: bars on a terminal (TTY), plain lines
	// otherwise; nil is silent.
	Log io.Writer
	TTY bool
}

// FromEnv configures a client as huggingface_hub does from its
// environment variables: HF_ENDPOINT, HF_TOKEN (else the token file),
// HF_HUB_CACHE / HF_HOME, HF_HUB_OFFLINE.
func FromEnv() *Client {
	ep := strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/")
	if ep == "" {
		ep = DefaultEndpoint
	}
	return &Client{Endpoint: ep, Token: envToken(), Cache: CacheDir(), Offline: truthy(os.Getenv("HF_HUB_OFFLINE")),
		HTTP: &http.Client{}, Attempts: 5, Backoff: time.Second}
}

// truthy follows huggingface_hub's reading of boolean variables.
func truthy(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// Home is $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface.
func Home() string {
	if h := os.Getenv("HF_HOME"); h != "" {
		return expandHome(h)
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "huggingface")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "huggingface")
}

// CacheDir is $HF_HUB_CACHE (or the older HUGGINGFACE_HUB_CACHE), else
// $HF_HOME/hub.
func CacheDir() string {
	for _, k := range []string{"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"} {
		if d := os.Getenv(k); d != "" {
			return expandHome(d)
		}
	}
	return filepath.Join(Home(), "hub")
}

// envToken is $HF_TOKEN, else the file `huggingface-cli login` writes
// ($HF_TOKEN_PATH, default $HF_HOME/token).
func envToken() string {
	if t := strings.TrimSpace(os.Getenv("HF_TOKEN")); t != "" {
		return t
	}
	p := os.Getenv("HF_TOKEN_PATH")
	if p == "" {
		p = filepath.Join(Home(), "token")
	}
	b, err := os.ReadFile(expandHome(p))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~"); ok && (rest == "" || rest[0] == '/') {
		if home, err := os.UserHomeDir(); err == nil {
			return home + rest
		}
	}
	return p
}

// Ref names a repository at a revision (branch, tag or commit).
type Ref struct {
	Repo     string // ORG/NAME
	Revision string // default "main"
}

func (r Ref) String() string {
	if r.Revision == "main" {
		return r.Repo
	}
	return r.Repo + "@" + r.Revision
}

var (
	namePart  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)
)

// ParseRef reads ORG/NAME[@REVISION] or a bare NAME[@REVISION], which is
// taken from DefaultOrg.
func ParseRef(s string) (Ref, error) {
	repo, rev, hasRev := strings.Cut(s, "@")
	if hasRev && rev == "" {
		return Ref{}, fmt.Errorf("model %q: empty revision after @", s)
	}
	if !hasRev {
		rev = "main"
	}
	if !strings.Contains(repo, "/") {
		repo = DefaultOrg + "/" + repo
	}
	parts := strings.Split(repo, "/")
	if len(parts) != 2 || !validName(parts[0]) || !validName(parts[1]) {
		return Ref{}, fmt.Errorf("model %q: not a Hub repository name (ORG/NAME[@REVISION])", s)
	}
	if strings.Contains(rev, "..") || strings.HasPrefix(rev, "/") {
		return Ref{}, fmt.Errorf("model %q: bad revision %q", s, rev)
	}
	return Ref{Repo: repo, Revision: rev}, nil
}

func validName(s string) bool {
	return namePart.MatchString(s) && !strings.Contains(s, "..") && !strings.Contains(s, "--") && len(s) <= 96
}

// LooksLikeRef reports whether s can only be meant as a Hub name: it
// parses and is not a path that starts with ., / or ~.
func LooksLikeRef(s string) bool {
	if s == "" || strings.ContainsAny(s[:1], "./~") || strings.Count(s, "/") > 1 {
		return false
	}
	_, err := ParseRef(s)
	return err == nil
}

// Resolve returns the snapshot folder of spec: the cached snapshot when it
// is complete (no network needed), else a fresh Pull.
func (c *Client) Resolve(ctx context.Context, spec string) (string, Ref, error) {
	ref, err := ParseRef(spec)
	if err != nil {
		return "", ref, err
	}
	if dir, err := c.Cached(ref); err == nil {
		return dir, ref, nil
	} else if c.Offline {
		return "", ref, err
	}
	dir, err := c.Pull(ctx, ref)
	return dir, ref, err
}

// ErrNotCached is returned when a repository has no complete snapshot.
var ErrNotCached = errors.New("not in the hub cache")
