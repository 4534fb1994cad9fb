package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mlxcel/mlxcel/internal/hub/hubtest"
)

// mlxcelEnv runs the CLI with extra environment variables.
func mlxcelEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// The "done when": pull through a dropped connection from a server
// speaking the Hub protocol, find every file intact in the hub layout, run
// the model by name from the cache (also offline with the server gone),
// list it and remove it.
func TestPullRunListRm(t *testing.T) {
	src := "../../internal/defaultmodel/stories260k"
	files := map[string][]byte{}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	f := hubtest.New(t)
	repo := f.Add("test-org/stories", files, "model.safetensors")
	f.Drops["model.safetensors"] = 1
	home := t.TempDir()
	env := []string{"HF_ENDPOINT=" + f.URL(), "HF_HOME=" + home, "HF_HUB_CACHE=", "HF_TOKEN=", "HF_HUB_OFFLINE="}

	out, stderr, err := mlxcelEnv(t, env, "pull", "test-org/stories")
	if err != nil {
		t.Fatalf("pull: %v: %s", err, stderr)
	}
	snap := filepath.Join(home, "hub", "models--test-org--stories", "snapshots", repo.SHA)
	if strings.TrimSpace(out) != snap {
		t.Fatalf("pull printed %q, want %s", out, snap)
	}
	if got := f.Ranges["model.safetensors"]; len(got) != 2 || got[1] == "" {
		t.Errorf("the dropped transfer was not resumed with Range: %q", got)
	}
	for name, b := range files {
		if name == "PROVENANCE.md" {
			if _, err := os.Stat(filepath.Join(snap, name)); err == nil {
				t.Error("pulled PROVENANCE.md, which inference does not need")
			}
			continue
		}
		got, err := os.ReadFile(filepath.Join(snap, name))
		if err != nil || string(got) != string(b) {
			t.Errorf("%s differs in the cache (%v)", name, err)
		}
	}

	want, _, err := mlxcelEnv(t, env, "run", "--backend", "cpu", "--temp", "0", "--max-tokens", "40")
	if err != nil {
		t.Fatal(err)
	}
	f.Add("mlx-community/stories", files, "model.safetensors")
	if _, stderr, err := mlxcelEnv(t, env, "pull", "stories"); err != nil {
		t.Fatalf("pull of a bare name: %v %s", err, stderr)
	}
	f.Close() // from here on the cache alone must do
	serveFromCache(t, append(env, "HF_HUB_OFFLINE=1"), "stories", "mlx-community/stories")
	for _, e := range [][]string{env, append(env, "HF_HUB_OFFLINE=1")} {
		got, stderr, err := mlxcelEnv(t, e, "run", "test-org/stories", "--backend", "cpu", "--temp", "0", "--max-tokens", "40")
		if err != nil || got != want {
			t.Fatalf("run from the cache: %q, %v (%s); want %q", got, err, stderr, want)
		}
		if !strings.Contains(stderr, "test-org/stories on cpu") {
			t.Errorf("the model is not named by its repository: %s", stderr)
		}
	}
	if _, stderr, err := mlxcelEnv(t, append(env, "HF_HUB_OFFLINE=1"), "run", "-m", "test-org/other", "-p", "x"); err == nil ||
		!strings.Contains(stderr, "HF_HUB_OFFLINE") {
		t.Errorf("offline run of an uncached repo: %v %s", err, stderr)
	}

	if out, stderr, err := mlxcelEnv(t, append(env, "HF_HUB_OFFLINE=1"), "inspect", "test-org/stories"); err != nil ||
		!strings.Contains(out, "architecture  llama") || !strings.Contains(out, snap) {
		t.Errorf("inspect from the cache: %q %v %s", out, err, stderr)
	}

	out, _, err = mlxcelEnv(t, env, "list", "--json")
	var list []struct {
		Repo, Revision, Commit, Path string
		Size                         int64
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list) != 2 || list[0].Repo != "mlx-community/stories" {
		t.Fatalf("list --json: %q, %v", out, err)
	}
	var size int64
	for name, b := range files {
		if name != "PROVENANCE.md" {
			size += int64(len(b))
		}
	}
	if l := list[1]; l.Repo != "test-org/stories" || l.Revision != "main" || l.Commit != repo.SHA || l.Size != size || l.Path != snap {
		t.Errorf("list entry %+v, want size %d path %s", l, size, snap)
	}
	if out, _, _ := mlxcelEnv(t, env, "list"); !strings.Contains(out, "test-org/stories") || !strings.Contains(out, "main") {
		t.Errorf("list: %q", out)
	}
	no := exec.Command(bin, "rm", "test-org/stories")
	no.Env, no.Stdin = append(os.Environ(), env...), strings.NewReader("n\n")
	if out, err := no.CombinedOutput(); err == nil || !strings.Contains(string(out), "[y/N]") {
		t.Errorf("rm answered n: %v %s", err, out)
	}
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("rm removed the model without a yes: %v", err)
	}
	if _, stderr, err := mlxcelEnv(t, env, "rm", "--yes", "test-org/stories"); err != nil {
		t.Fatalf("rm: %v %s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "hub", "models--test-org--stories")); !os.IsNotExist(err) {
		t.Errorf("rm left the repository folder (%v)", err)
	}
	if out, _, _ := mlxcelEnv(t, env, "list", "--json"); strings.Contains(out, "test-org") || !strings.Contains(out, "mlx-community/stories") {
		t.Errorf("list after rm: %q", out)
	}
}

// A model whose KV cache for its full context cannot fit host memory
// stops before loading with the numbers; --ctx-size sizes the cache, and
// inspect prints the same estimate.
func TestMemoryPreflight(t *testing.T) {
	dir := t.TempDir()
	src := "../../internal/defaultmodel/stories260k"
	for _, n := range []string{"model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json"} {
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			t.Fatal(err)
		}
		if n == "config.json" {
			var cfg map[string]any
			json.Unmarshal(b, &cfg)
			// 160 KiB of f32 KV a token (5 layers x 2 x 4 heads x 1024)
			// over 2^24 tokens: 2.5 TiB, more than any host has. The
			// weights no longer match, which only a load would see.
			cfg["max_position_embeddings"] = 1 << 24
			cfg["head_dim"] = 1024
			b, _ = json.Marshal(cfg)
		}
		os.WriteFile(filepath.Join(dir, n), b, 0o644)
	}
	_, stderr, err := mlxcel(t, "run", "-m", dir, "--backend", "cpu", "-p", "Once")
	if err == nil || !strings.Contains(stderr, "memory preflight") || !strings.Contains(stderr, "16777216 tokens") ||
		!strings.Contains(stderr, "--ctx-size") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Fatalf("run over memory: %v\n%s", err, stderr)
	}
	if out, stderr, err := mlxcel(t, "run", "-m", src, "--backend", "cpu", "--ctx-size", "256", "-p", "Once", "--max-tokens", "8"); err != nil || out == "" {
		t.Fatalf("run --ctx-size 256: %v %s", err, stderr)
	}
	out, _, err := mlxcel(t, "inspect", "--backend", "cpu", "--ctx-size", "4096", "--parallel", "2", dir)
	if err != nil || !strings.Contains(out, "estimate      on cpu: weights") || !strings.Contains(out, "KV 1.25 GiB (8192 tokens, --parallel 2)") ||
		!strings.Contains(out, "fits") {
		t.Errorf("inspect: %v\n%s", err, out)
	}
	out, _, _ = mlxcel(t, "inspect", "--backend", "cpu", "--json", dir)
	var r struct {
		Estimate struct {
			KVTokens   int   `json:"kv_tokens"`
			KVPerToken int64 `json:"kv_bytes_per_token"`
			Fits       bool
		} `json:"memory_estimate"`
	}
	if json.Unmarshal([]byte(out), &r) != nil || r.Estimate.KVTokens != 1<<24 || r.Estimate.KVPerToken != 163840 || r.Estimate.Fits {
		t.Errorf("inspect --json estimate: %+v\n%s", r.Estimate, out)
	}
}

// serveFromCache starts `mlxcel serve -m spec` and checks that it serves
// the model under its repository name and completes a request.
func serveFromCache(t *testing.T, env []string, spec, id string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "serve", "-m", spec, "--backend", "cpu", "--port", strconv.Itoa(port))
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	var models struct{ Data []struct{ ID string } }
	for i := 0; ; i++ {
		resp, err := http.Get(url + "/v1/models")
		if err == nil && resp.StatusCode == 200 {
			json.NewDecoder(resp.Body).Decode(&models)
			resp.Body.Close()
			break
		}
		if err == nil {
			resp.Body.Close()
		}
		if i == 100 {
			t.Fatalf("serve -m %s never became ready: %s", spec, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(models.Data) != 1 || models.Data[0].ID != id {
		t.Errorf("serving %+v, want %s", models.Data, id)
	}
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"Once upon a time","max_tokens":8,"temperature":0}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("completion: %v %v", err, resp)
	}
	resp.Body.Close()
}
