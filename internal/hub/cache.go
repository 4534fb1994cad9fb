package hub

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
)

// The cache layout of huggingface_hub:
//
//	<cache>/models--ORG--NAME/refs/<revision>        commit sha of a branch or tag
//	<cache>/models--ORG--NAME/blobs/<etag>           file contents, named by ETag
//	<cache>/models--ORG--NAME/blobs/<etag>.incomplete  a transfer in progress
//	<cache>/models--ORG--NAME/snapshots/<sha>/<file> relative symlink to ../../blobs/<etag>
//	<cache>/.locks/models--ORG--NAME/<etag>.lock     held while a blob is written

// repoFolder is "models--ORG--NAME".
func repoFolder(repo string) string { return "models--" + strings.ReplaceAll(repo, "/", "--") }

func (c *Client) repoDir(repo string) string { return filepath.Join(c.Cache, repoFolder(repo)) }

func (c *Client) blobPath(repo, etag string) string {
	return filepath.Join(c.repoDir(repo), "blobs", etag)
}

func (c *Client) lockPath(repo, etag string) string {
	return filepath.Join(c.Cache, ".locks", repoFolder(repo), etag+".lock")
}

func (c *Client) snapshotDir(repo, commit string) string {
	return filepath.Join(c.repoDir(repo), "snapshots", commit)
}

// commitOf resolves a revision through refs/ (a commit sha is itself).
func (c *Client) commitOf(ref Ref) (string, error) {
	if commitSHA.MatchString(ref.Revision) {
		return ref.Revision, nil
	}
	b, err := os.ReadFile(filepath.Join(c.repoDir(ref.Repo), "refs", filepath.FromSlash(ref.Revision)))
	if err != nil {
		return "", fmt.Errorf("%s: %w (%s)", ref, ErrNotCached, c.Cache)
	}
	return strings.TrimSpace(string(b)), nil
}

// Cached returns the snapshot folder of ref when it holds a loadable model.
func (c *Client) Cached(ref Ref) (string, error) {
	commit, err := c.commitOf(ref)
	if err != nil {
		return "", err
	}
	dir := c.snapshotDir(ref.Repo, commit)
	if missing := missingFiles(dir); len(missing) > 0 {
		return "", fmt.Errorf("%s: %w: snapshot %s lacks %s", ref, ErrNotCached, commit[:min(12, len(commit))], strings.Join(missing, ", "))
	}
	return dir, nil
}

// missingFiles lists what a snapshot lacks to be loaded: config.json and
// the weights (every shard an index names, else one *.safetensors).
// huggingface_hub links a file into the snapshot only once its blob is
// complete, so a pull that broke off leaves a snapshot missing files,
// never one with partial ones.
func missingFiles(dir string) []string {
	var missing []string
	if !exists(filepath.Join(dir, "config.json")) {
		missing = append(missing, "config.json")
	}
	if shards, err := indexShards(dir); err == nil {
		for _, s := range shards {
			if !exists(filepath.Join(dir, s)) {
				missing = append(missing, s)
			}
		}
	} else if exists(filepath.Join(dir, indexFile)) {
		missing = append(missing, indexFile+" (unreadable)")
	} else if m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(m) == 0 {
		missing = append(missing, "*.safetensors")
	}
	return missing
}

const indexFile = "model.safetensors.index.json"

// indexShards lists the shard files a safetensors index maps tensors to.
func indexShards(dir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(dir, indexFile))
	if err != nil {
		return nil, err
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("%s: %v", indexFile, err)
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range idx.WeightMap {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// writeRef records the commit a branch or tag pointed to (atomically: a
// concurrent reader sees the old sha or the new one).
func (c *Client) writeRef(ref Ref, commit string) error {
	if ref.Revision == commit {
		return nil
	}
	p := filepath.Join(c.repoDir(ref.Repo), "refs", filepath.FromSlash(ref.Revision))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".ref-*")
	if err != nil {
		return err
	}
	_, werr := tmp.WriteString(commit)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
	}
	return werr
}

var tmpSeq atomic.Int64

// link points snapshots/<commit>/<file> at its blob with a relative
// symlink, replacing any older link atomically.
func (c *Client) link(repo, commit, file, etag string) error {
	ptr := filepath.Join(c.snapshotDir(repo, commit), filepath.FromSlash(file))
	if err := os.MkdirAll(filepath.Dir(ptr), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(ptr), c.blobPath(repo, etag))
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(ptr); err == nil && cur == rel {
		return nil
	}
	// A name of its own per writer: concurrent pulls in one process too.
	tmp := fmt.Sprintf("%s.tmp%d-%d", ptr, os.Getpid(), tmpSeq.Add(1))
	if err := os.Symlink(rel, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, ptr); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// Entry is one cached snapshot.
type Entry struct {
	Repo     string   `json:"repo"`
	Revision string   `json:"revision"` // the refs naming it, or the short commit
	Commit   string   `json:"commit"`
	Size     int64    `json:"size"` // bytes of the files it links
	Path     string   `json:"path"`
	Complete bool     `json:"complete"`
	Refs     []string `json:"refs,omitempty"`
}

// List returns every cached model snapshot, sorted by repository.
func (c *Client) List() ([]Entry, error) {
	dirs, err := os.ReadDir(c.Cache)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range dirs {
		rest, ok := strings.CutPrefix(d.Name(), "models--")
		if !ok || !d.IsDir() {
			continue
		}
		org, name, ok := strings.Cut(rest, "--")
		if !ok {
			continue
		}
		out = append(out, c.repoEntries(org+"/"+name)...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Repo != out[j].Repo {
			return out[i].Repo < out[j].Repo
		}
		return out[i].Revision < out[j].Revision
	})
	return out, nil
}

func (c *Client) repoEntries(repo string) []Entry {
	refs := map[string][]string{}
	refDir := filepath.Join(c.repoDir(repo), "refs")
	filepath.WalkDir(refDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(p); err == nil {
				rel, _ := filepath.Rel(refDir, p)
				sha := strings.TrimSpace(string(b))
				refs[sha] = append(refs[sha], filepath.ToSlash(rel))
			}
		}
		return nil
	})
	snaps, _ := os.ReadDir(filepath.Join(c.repoDir(repo), "snapshots"))
	var out []Entry
	for _, s := range snaps {
		dir := c.snapshotDir(repo, s.Name())
		e := Entry{Repo: repo, Commit: s.Name(), Path: dir, Size: treeSize(dir), Complete: len(missingFiles(dir)) == 0,
			Refs: refs[s.Name()]}
		sort.Strings(e.Refs)
		e.Revision = strings.Join(e.Refs, ",")
		if e.Revision == "" {
			e.Revision = s.Name()[:min(12, len(s.Name()))]
		}
		out = append(out, e)
	}
	return out
}

// treeSize adds the sizes of the files a snapshot links (following links).
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				n += st.Size()
			}
		}
		return nil
	})
	return n
}

// Remove deletes a repository's cache folder and its locks, returning
// the bytes freed (blobs, whatever snapshots shared them).
func (c *Client) Remove(repo string) (int64, error) {
	ref, err := ParseRef(repo)
	if err != nil {
		return 0, err
	}
	dir := c.repoDir(ref.Repo)
	if !exists(dir) {
		return 0, fmt.Errorf("%s: %w (%s)", ref.Repo, ErrNotCached, c.Cache)
	}
	var n int64
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	if err := os.RemoveAll(dir); err != nil {
		return 0, err
	}
	os.RemoveAll(filepath.Join(c.Cache, ".locks", repoFolder(ref.Repo)))
	return n, nil
}
