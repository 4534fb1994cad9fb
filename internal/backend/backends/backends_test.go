package backends_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/backend"
	_ "github.com/mlxcel/mlxcel/internal/backend/backends"
)

func TestEveryBackendRegistered(t *testing.T) {
	got := strings.Join(backend.Names(), ",")
	if got != "cpu,cuda" {
		t.Fatalf("registered backends %q, want cpu,cuda", got)
	}
}

func TestRegisterTwicePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "cpu registered twice") {
			t.Fatalf("second Register of cpu: recovered %v, want a panic naming it", r)
		}
	}()
	backend.Register("cpu", nil)
}

// hasDriver: a machine where libcuda can be opened starts the backend for
// real; the check below is for machines without one (CI's).
func hasDriver() bool {
	out, _ := exec.Command("ldconfig", "-p").Output()
	if strings.Contains(string(out), "libcuda.so") {
		return true
	}
	for _, d := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/local/nvidia/lib64", "/usr/lib/wsl/lib"} {
		if m, _ := filepath.Glob(filepath.Join(d, "libcuda.so*")); len(m) > 0 {
			return true
		}
	}
	return false
}

// TestCommandsLinkCUDA builds every command and asks each for the CUDA
// backend: without a driver each must fail with the driver's own message
// (libcuda not found), never "unknown backend", which is what a binary
// that forgot to link the backend says.
func TestCommandsLinkCUDA(t *testing.T) {
	if hasDriver() {
		t.Skip("this machine has libcuda: the commands would start the backend (the GPU tests cover it)")
	}
	fixture, err := filepath.Abs("../../../../shared/testdata/tiny/llama-bf16")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fixture); err != nil {
		t.Fatalf("reference fixture missing (../shared/testdata): %v", err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
	for _, c := range []struct {
		bin  string
		args []string
	}{
		{"mlxcel", []string{"run", "--backend", "cuda", "--max-tokens", "1"}},
		{"mlxcel", []string{"serve", "--backend", "cuda", "--port", "0"}},
		{"mlxcel", []string{"bench", "decode", "--backend", "cuda", "--model", fixture, "--prompt-tokens", "1", "--max-tokens", "1"}},
		{"mlxcel-server", []string{"--backend", "cuda", "--port", "0"}},
		{"mlxcel-bench-decode", []string{"--backend", "cuda", "--model", fixture, "--prompt-tokens", "1", "--max-tokens", "1"}},
	} {
		cmd := exec.Command(filepath.Join(dir, c.bin), c.args...)
		cmd.Env = append(os.Environ(), "MLXCEL_CUDA_LIB=/nonexistent/libcuda.so.1", "LD_LIBRARY_PATH=")
		out, err := cmd.CombinedOutput()
		name := c.bin + " " + strings.Join(c.args, " ")
		if err == nil {
			t.Errorf("%s: succeeded without a driver:\n%s", name, out)
			continue
		}
		if strings.Contains(string(out), "unknown backend") || !strings.Contains(string(out), "libcuda.so.1 not found") {
			t.Errorf("%s: want the driver's 'libcuda.so.1 not found', got:\n%s", name, out)
		}
	}
}
