package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// fileMeta is what a HEAD on the resolve URL says about one file.
type fileMeta struct {
	Name   string
	ETag   string // blob name: sha256 of an LFS file, git blob sha1 otherwise
	Size   int64
	URL    string // where to GET it (the CDN for large files)
	LFS    bool   // X-Linked-Etag was given: ETag is the content's sha256
	Commit string
}

// head reads a file's metadata. Like huggingface_hub it follows only
// redirects within the Hub (a renamed repository): the answer that sends
// large files to the CDN carries X-Linked-Etag and X-Linked-Size itself.
func (c *Client) head(ctx context.Context, commit Ref, file string) (fileMeta, error) {
	m := fileMeta{Name: file}
	hc := *c.HTTP
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 || !c.sameHost(req.URL) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	err := c.retry(ctx, commit.Repo+": "+file, func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.fileURL(commit, file), nil)
		if err != nil {
			return err
		}
		c.headers(req)
		req.Header.Set("Accept-Encoding", "identity")
		resp, err := hc.Do(req)
		if err != nil {
			return retryable{err}
		}
		resp.Body.Close()
		if err := c.statusError(commit, file, resp); err != nil {
			return err
		}
		if err := m.parse(resp); err != nil {
			return err
		}
		// Files are asked for by commit: another one in X-Repo-Commit
		// would put them in the wrong snapshot.
		if m.Commit != "" && m.Commit != commit.Revision {
			return fmt.Errorf("%s: %s: the Hub answered commit %s for commit %s", commit.Repo, file, m.Commit, commit.Revision)
		}
		return nil
	})
	return m, err
}

func (m *fileMeta) parse(resp *http.Response) error {
	h := resp.Header
	m.Commit = h.Get("X-Repo-Commit")
	m.ETag, m.LFS = normEtag(h.Get("X-Linked-Etag")), true
	if m.ETag == "" {
		m.ETag, m.LFS = normEtag(h.Get("ETag")), false
	}
	size := h.Get("X-Linked-Size")
	if size == "" {
		size = h.Get("Content-Length")
	}
	n, err := strconv.ParseInt(size, 10, 64)
	switch {
	case m.ETag == "" || strings.ContainsAny(m.ETag, `/\`) || m.ETag == "." || m.ETag == "..":
		return fmt.Errorf("%s: the Hub sent no usable ETag", m.Name)
	case err != nil || n < 0:
		return fmt.Errorf("%s: the Hub sent no file size", m.Name)
	}
	m.Size = n
	m.URL = resp.Request.URL.String()
	if loc := h.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		u, err := resp.Request.URL.Parse(loc)
		if err != nil {
			return fmt.Errorf("%s: bad redirect %q", m.Name, loc)
		}
		m.URL = u.String()
	}
	return nil
}

// normEtag strips the weak marker and quotes.
func normEtag(s string) string { return strings.Trim(strings.TrimPrefix(s, "W/"), `"`) }

// fetch makes sure the file's blob exists and the snapshot links it. The
// blob's lock keeps two pulls (processes or goroutines) from writing the
// same .incomplete file; the second finds the blob done and only links.
func (c *Client) fetch(ctx context.Context, commit Ref, m *fileMeta, p *progress) error {
	blob := c.blobPath(commit.Repo, m.ETag)
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return err
	}
	if p != nil {
		p.startFile(m.Name, m.Size)
	}
	unlock, err := lockFile(c.lockPath(commit.Repo, m.ETag))
	if err != nil {
		return err
	}
	defer unlock()
	if st, err := os.Stat(blob); err != nil || st.Size() != m.Size {
		if err := c.download(ctx, commit, m, blob, p); err != nil {
			return err
		}
	} else if p != nil {
		p.add(m.Size)
	}
	if p != nil {
		p.endFile()
	}
	return c.link(commit.Repo, commit.Revision, m.Name, m.ETag)
}

// download writes blob.incomplete, resuming what an earlier attempt (or
// an earlier run) left, verifies it and renames it into place.
func (c *Client) download(ctx context.Context, commit Ref, m *fileMeta, blob string, p *progress) error {
	part := blob + ".incomplete"
	return c.retry(ctx, commit.Repo+": "+m.Name, func() error {
		if err := c.transfer(ctx, commit, m, part, p); err != nil {
			return err
		}
		if err := verify(part, m); err != nil {
			os.Remove(part) // start over: resuming bad bytes cannot help
			if p != nil {
				p.reset(m.Size)
			}
			return retryable{err}
		}
		return os.Rename(part, blob)
	})
}

// transfer appends the rest of the file to part with a Range request.
func (c *Client) transfer(ctx context.Context, commit Ref, m *fileMeta, part string, p *progress) error {
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if have > m.Size { // not ours to resume
		if err := f.Truncate(0); err != nil {
			return err
		}
		have, _ = f.Seek(0, io.SeekStart)
	}
	if p != nil {
		p.resumeAt(have)
	}
	if have == m.Size {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return err
	}
	c.headers(req)
	req.Header.Set("Accept-Encoding", "identity")
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return retryable{err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK && have > 0:
		// The server ignored Range: start from the first byte.
		if err := f.Truncate(0); err != nil {
			return err
		}
		f.Seek(0, io.SeekStart)
		if p != nil {
			p.resumeAt(0)
		}
	case resp.StatusCode == http.StatusPartialContent:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			return retryable{fmt.Errorf("%s: the server resumed at the wrong offset (%s)", m.Name, resp.Header.Get("Content-Range"))}
		}
	case resp.StatusCode >= 400:
		return c.statusError(commit, m.Name, resp)
	}
	var w io.Writer = f
	if p != nil {
		w = io.MultiWriter(f, p)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return retryable{fmt.Errorf("%s: transfer broke off: %v", m.Name, err)}
	}
	if st, err := f.Stat(); err != nil || st.Size() != m.Size {
		return retryable{fmt.Errorf("%s: got %d of %d bytes", m.Name, sizeOf(st), m.Size)}
	}
	return f.Sync()
}

func sizeOf(st os.FileInfo) int64 {
	if st == nil {
		return -1
	}
	return st.Size()
}

// verify checks a finished file against its ETag: the sha256 of the
// content for LFS files, the git blob sha1 ("blob <size>\0" + content)
// for the small files git stores itself. An ETag of another shape (a
// server that hashes differently) is not checked beyond the size.
func verify(p string, m *fileMeta) error {
	var h hash.Hash
	switch {
	case m.LFS && len(m.ETag) == 64:
		h = sha256.New()
	case !m.LFS && len(m.ETag) == 40:
		h = sha1.New()
		fmt.Fprintf(h, "blob %d\x00", m.Size)
	case len(m.ETag) == 64:
		h = sha256.New()
	default:
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != m.ETag {
		return fmt.Errorf("%s: checksum mismatch: got %s, the Hub says %s", m.Name, got, m.ETag)
	}
	return nil
}

// retry runs fn until it succeeds, fails for good, or runs out of
// attempts, sleeping Backoff, 2*Backoff, ... between attempts.
func (c *Client) retry(ctx context.Context, what string, fn func() error) error {
	attempts := max(c.Attempts, 1)
	delay := c.Backoff
	var err error
	for i := range attempts {
		if err = fn(); err == nil || !isRetryable(err) || ctx.Err() != nil {
			break
		}
		if i == attempts-1 {
			break
		}
		if c.Log != nil && !c.TTY {
			fmt.Fprintf(c.Log, "%s: %v; retrying in %s\n", what, err, delay)
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
		delay *= 2
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var r retryable
	if errors.As(err, &r) {
		return fmt.Errorf("%w (after %d attempts)", r.err, attempts)
	}
	return err
}
