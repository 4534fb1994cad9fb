package hub

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/hub/hubtest"
)

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// modelFiles is a sharded model repository with files mlxcel must skip.
func modelFiles() map[string][]byte {
	return map[string][]byte{
		"config.json":                      []byte(`{"model_type":"llama"}`),
		"tokenizer.json":                   []byte(`{"model":{"type":"BPE"}}`),
		"tokenizer_config.json":            []byte(`{}`),
		"README.md":                        []byte("# card"),
		"model.safetensors.index.json":     []byte(`{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`),
		"model-00001-of-00002.safetensors": randBytes(200_000, 1),
		"model-00002-of-00002.safetensors": randBytes(150_001, 2),
		"consolidated.safetensors":         randBytes(1000, 3),
		"onnx/model.onnx":                  []byte("onnx"),
	}
}

var lfsShards = []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "consolidated.safetensors"}

func TestPullLayout(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	repo := f.Add("org/tiny", files, lfsShards...)
	c := testClient(t, f)
	c.Token = "secret"
	dir, err := c.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"})
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(c.Cache, "models--org--tiny")
	if want := filepath.Join(root, "snapshots", repo.SHA); dir != want {
		t.Fatalf("snapshot %s, want %s", dir, want)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "refs", "main")); string(b) != repo.SHA {
		t.Errorf("refs/main = %q, want %s", b, repo.SHA)
	}
	want := []string{"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
		"model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"}
	ents, _ := os.ReadDir(dir)
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("snapshot holds %v, want %v", got, want)
	}
	for _, name := range want {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s is not a symlink: %v", name, err)
		}
		etag := hubtest.GitSHA1(files[name])
		if repo.LFS[name] {
			etag = hubtest.SHA256Hex(files[name])
		}
		if target != filepath.Join("..", "..", "blobs", etag) {
			t.Errorf("%s -> %s, want ../../blobs/%s", name, target, etag)
		}
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(b, files[name]) {
			t.Errorf("%s: content differs (%v)", name, err)
		}
	}
	blobs, _ := filepath.Glob(filepath.Join(root, "blobs", "*"))
	if len(blobs) != len(want) {
		t.Errorf("%d blobs, want %d: %v", len(blobs), len(want), blobs)
	}
	if locks, _ := filepath.Glob(filepath.Join(c.Cache, ".locks", "models--org--tiny", "*.lock")); len(locks) != len(want) {
		t.Errorf("%d lock files, want %d", len(locks), len(want))
	}
	for i, a := range f.CDNAuth {
		if a != "" {
			t.Errorf("CDN request %d carried Authorization %q: the token must stay on the Hub", i, a)
		}
	}
	if f.CDNGets["consolidated.safetensors"] != 0 {
		t.Error("a file the index does not name was downloaded")
	}
}

func TestPullResumesDroppedConnection(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	f.Add("org/tiny", files, lfsShards...)
	shard := "model-00001-of-00002.safetensors"
	f.Drops[shard] = 2 // break off twice: two resumes
	c := testClient(t, f)
	dir, err := c.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, shard)); !bytes.Equal(b, files[shard]) {
		t.Fatal("resumed shard differs from the original")
	}
	// 200000 bytes: the first transfer stops at 100000, the resume at
	// 100000 + 50000.
	want := []string{"", "bytes=100000-", "bytes=150000-"}
	if got := f.Ranges[shard]; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("Range headers %q, want %q", got, want)
	}
	if m, _ := filepath.Glob(filepath.Join(c.Cache, "*", "blobs", "*.incomplete")); len(m) != 0 {
		t.Errorf("left %v", m)
	}
}

func TestPullResumesIncompleteFromEarlierRun(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	f.Add("org/tiny", files, lfsShards...)
	c := testClient(t, f)
	shard := "model-00002-of-00002.safetensors"
	part := c.blobPath("org/tiny", hubtest.SHA256Hex(files[shard])) + ".incomplete"
	os.MkdirAll(filepath.Dir(part), 0o755)
	os.WriteFile(part, files[shard][:12345], 0o644)
	dir, err := c.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, shard)); !bytes.Equal(b, files[shard]) {
		t.Fatal("shard differs")
	}
	if got := f.Ranges[shard]; len(got) != 1 || got[0] != "bytes=12345-" {
		t.Errorf("Range headers %q, want one resuming at byte 12345", got)
	}
}

func TestPullBadChecksum(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	f.Add("org/tiny", files, lfsShards...)
	shard := "model-00002-of-00002.safetensors"

	f.Corrupt[shard] = 1 // once: the retry gets good bytes
	c := testClient(t, f)
	dir, err := c.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, shard)); !bytes.Equal(b, files[shard]) {
		t.Fatal("shard differs after a corrupt first transfer")
	}
	if f.CDNGets[shard] != 2 {
		t.Errorf("shard fetched %d times, want 2", f.CDNGets[shard])
	}

	f.Corrupt[shard] = 100 // always: the pull fails and links nothing bad
	c = testClient(t, f)
	_, err = c.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"})
	if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("err = %v, want a checksum mismatch", err)
	}
	if m, _ := filepath.Glob(filepath.Join(c.Cache, "*", "snapshots", "*", shard)); len(m) != 0 {
		t.Errorf("a corrupt file is in the snapshot: %v", m)
	}
	if _, err := c.Cached(Ref{Repo: "org/tiny", Revision: "main"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("Cached after a failed pull: %v", err)
	}
}

func TestPullErrors(t *testing.T) {
	f := hubtest.New(t)
	f.Add("org/gated", modelFiles(), lfsShards...).Gated = true
	f.Add("org/conditions", modelFiles(), lfsShards...).Forbidden = true
	f.Token = "good"
	c := testClient(t, f)
	for _, tc := range []struct {
		repo, token string
		want        []string
	}{
		{"org/gated", "", []string{"401", "set HF_TOKEN"}},
		{"org/gated", "bad", []string{"401", "HF_TOKEN"}},
		{"org/missing", "", []string{"org/missing", "not found"}},
		{"org/gated@v9", "good", []string{`revision "v9" not found`}},
		{"org/conditions", "good", []string{"gated (403)", "accept the conditions on " + f.URL() + "/org/conditions"}},
	} {
		c.Token = tc.token
		ref, _ := ParseRef(tc.repo)
		_, err := c.Pull(context.Background(), ref)
		if err == nil {
			t.Fatalf("%s: no error", tc.repo)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s (token %q): %q lacks %q", tc.repo, tc.token, err, w)
			}
		}
		if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "attempts") {
			t.Errorf("%s: %q is not one line without retries", tc.repo, err)
		}
	}
	c.Token = "good"
	if _, err := c.Pull(context.Background(), Ref{Repo: "org/gated", Revision: "main"}); err != nil {
		t.Errorf("with the token: %v", err)
	}
	f.Add("org/moved", modelFiles(), lfsShards...).Commit = strings.Repeat("ab", 20)
	if _, err := c.Pull(context.Background(), Ref{Repo: "org/moved", Revision: "main"}); err == nil ||
		!strings.Contains(err.Error(), "answered commit abab") {
		t.Errorf("X-Repo-Commit of another commit: %v", err)
	}
}

func TestOfflineAndCacheFirst(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	repo := f.Add("org/tiny", files, lfsShards...)
	c := testClient(t, f)
	dir, _, err := c.Resolve(context.Background(), "org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	// With the hub gone, a cached model resolves from refs/ alone.
	for _, offline := range []bool{false, true} {
		c.Offline = offline
		for _, spec := range []string{"org/tiny", "org/tiny@" + repo.SHA} {
			got, _, err := c.Resolve(context.Background(), spec)
			if err != nil || got != dir {
				t.Errorf("offline=%v %s: %s, %v; want %s", offline, spec, got, err, dir)
			}
		}
	}
	c.Offline = true
	if _, _, err := c.Resolve(context.Background(), "org/other"); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline, uncached: %v", err)
	}
	if _, err := c.Pull(context.Background(), Ref{Repo: "org/other", Revision: "main"}); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline pull: %v", err)
	}
}

func TestConcurrentPulls(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	f.Add("org/tiny", files, lfsShards...)
	f.SlowBytes = 200_000 // 0.2 ms a chunk: the transfers overlap
	c := testClient(t, f)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c2 := *c
			_, errs[i] = c2.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
	for _, s := range lfsShards[:2] {
		if f.CDNGets[s] != 1 {
			t.Errorf("%s downloaded %d times by 3 concurrent pulls, want once", s, f.CDNGets[s])
		}
		b, _ := os.ReadFile(filepath.Join(c.snapshotDir("org/tiny", f.Repos["org/tiny"].SHA), s))
		if !bytes.Equal(b, files[s]) {
			t.Errorf("%s corrupted", s)
		}
	}
}

func TestListAndRemove(t *testing.T) {
	f := hubtest.New(t)
	files := modelFiles()
	repo := f.Add("org/tiny", files, lfsShards...)
	f.Add("mlx-community/small", map[string][]byte{"config.json": []byte("{}"), "model.safetensors": randBytes(5000, 9)}, "model.safetensors")
	c := testClient(t, f)
	for _, s := range []string{"org/tiny", "small"} {
		if _, _, err := c.Resolve(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	list, err := c.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("list %v, %v", list, err)
	}
	var tinySize int64
	for _, n := range []string{"config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
		"model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"} {
		tinySize += int64(len(files[n]))
	}
	e := list[1]
	if e.Repo != "org/tiny" || e.Revision != "main" || e.Commit != repo.SHA || e.Size != tinySize || !e.Complete {
		t.Errorf("entry %+v, want org/tiny main %s size %d complete", e, repo.SHA, tinySize)
	}
	if list[0].Repo != "mlx-community/small" || list[0].Size != 5002 {
		t.Errorf("entry %+v", list[0])
	}
	freed, err := c.Remove("org/tiny")
	if err != nil || freed != tinySize {
		t.Errorf("removed %d bytes, %v; want %d", freed, err, tinySize)
	}
	if exists(filepath.Join(c.Cache, "models--org--tiny")) {
		t.Error("repo folder still there")
	}
	if _, err := c.Remove("org/tiny"); !errors.Is(err, ErrNotCached) {
		t.Errorf("second remove: %v", err)
	}
	if list, _ := c.List(); len(list) != 1 {
		t.Errorf("after remove: %v", list)
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{
		"Qwen3-4B-4bit":                {"mlx-community/Qwen3-4B-4bit", "main"},
		"org/name":                     {"org/name", "main"},
		"org/name@v1.0":                {"org/name", "v1.0"},
		"org/name@refs/pr/1":           {"org/name", "refs/pr/1"},
		"meta-llama/Llama-3.1-8B@abcd": {"meta-llama/Llama-3.1-8B", "abcd"},
	} {
		got, err := ParseRef(in)
		if err != nil || got != want {
			t.Errorf("ParseRef(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"a/b/c", "org/", "/name", "org/na me", "org/name@", "org/..", "org/name@../x", "a--b/c"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) accepted", bad)
		}
	}
	for s, want := range map[string]bool{"org/name": true, "name": true, "./name": false, "/abs/dir": false, "a/b/c": false, "~/m": false} {
		if LooksLikeRef(s) != want {
			t.Errorf("LooksLikeRef(%q) = %v", s, !want)
		}
	}
}

func TestEnv(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HUGGINGFACE_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_TOKEN_PATH", "")
	t.Setenv("HF_ENDPOINT", "http://example.test/")
	t.Setenv("HF_HUB_OFFLINE", "1")
	os.WriteFile(filepath.Join(home, "token"), []byte("hf_file\n"), 0o600)
	c := FromEnv()
	if c.Cache != filepath.Join(home, "hub") || c.Token != "hf_file" || c.Endpoint != "http://example.test" || !c.Offline {
		t.Errorf("from env: %+v", c)
	}
	t.Setenv("HF_TOKEN", "hf_env")
	t.Setenv("HF_HUB_CACHE", "/x/cache")
	t.Setenv("HF_HUB_OFFLINE", "0")
	c = FromEnv()
	if c.Cache != "/x/cache" || c.Token != "hf_env" || c.Offline {
		t.Errorf("from env: %+v", c)
	}
}

// testClient is a Client on the fake hub with a fresh cache and fast retries.
func testClient(t *testing.T, f *hubtest.Server) *Client {
	return &Client{Endpoint: f.URL(), Cache: t.TempDir(), HTTP: &http.Client{}, Attempts: 4, Backoff: time.Millisecond}
}

// Progress: a bar on a terminal, plain lines otherwise, both ending with
// the totals.
func TestProgressOutput(t *testing.T) {
	f := hubtest.New(t)
	f.Add("org/tiny", modelFiles(), lfsShards...)
	for _, tty := range []bool{false, true} {
		var log strings.Builder
		c := testClient(t, f)
		c.Log, c.TTY = &log, tty
		if _, err := c.Pull(context.Background(), Ref{Repo: "org/tiny", Revision: "main"}); err != nil {
			t.Fatal(err)
		}
		out := log.String()
		if !strings.Contains(out, "pulled org/tiny: 6 files, 350.1 kB in") {
			t.Errorf("tty=%v: no summary line:\n%s", tty, out)
		}
		if tty && !strings.Contains(out, "[6/6] tokenizer_config.json 100%, total 100%") {
			t.Errorf("tty: the bar does not name the file:\n%q", out)
		}
		if !tty && (!strings.Contains(out, "pulling org/tiny: 6 files, 350.1 kB\n") ||
			!strings.Contains(out, "  [2/6] model-00001-of-00002.safetensors 200.0 kB in")) {
			t.Errorf("plain lines:\n%s", out)
		}
	}
}
