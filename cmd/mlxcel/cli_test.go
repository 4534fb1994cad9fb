package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlxcel/mlxcel/internal/model/modeltest"
)

const testdata = "../../../shared/testdata/"

var bin string

// TestMain builds the CLI once; the tests run it as a user would.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "mlxcel-cli")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "mlxcel")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func mlxcel(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e strings.Builder
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// The embedded model tells llama2.c's published greedy story from a lone BOS.
func TestRunDefaultModelPrintsTheStory(t *testing.T) {
	want, err := os.ReadFile(testdata + "models/stories260k/greedy_story.txt")
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := mlxcel(t, "run", "--backend", "cpu", "--temp", "0", "--max-tokens", "255")
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	if !strings.HasPrefix(out, string(want[:500])) {
		t.Fatalf("output does not start with the story:\n got %q\nwant %q", out[:min(len(out), 200)], want[:200])
	}
	if !strings.Contains(stderr, "decode:") || !strings.Contains(stderr, "tok/s") {
		t.Errorf("no speed report on stderr: %q", stderr)
	}
}

// Each tiny fixture reproduces its reference greedy ids through the CLI,
// up to the first near-tie (after it a free-running continuation may
// legitimately differ).
func TestRunTinyFixturesGreedy(t *testing.T) {
	for _, f := range []string{"llama-bf16", "qwen2-bf16", "qwen3-bf16", "llama-mlx-q4g64", "qwen2-mlx-q4g64",
		"qwen3-mlx-q4g64", "qwen3_moe-bf16", "mixtral-mlx-q4g64", "gemma4-bf16", "gemma4-mlx-q4g64",
		"qwen3_5_text-bf16", "qwen3_5_text-mlx-q4g64", "qwen3_5_moe_text-bf16", "qwen3_5_moe_text-mlx-q4g64"} {
		t.Run(f, func(t *testing.T) {
			dir := testdata + "tiny/" + f
			ref, err := modeltest.LoadReference(dir)
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := json.Marshal(ref.InputIDs)
			out, stderr, err := mlxcel(t, "run", "--backend", "cpu", "--model", dir, "--prompt-ids", string(ids),
				"--temp", "0", "--ignore-eos", "--max-tokens", "24", "--print-ids")
			if err != nil {
				t.Fatalf("%v: %s", err, stderr)
			}
			var got []int32
			if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil {
				t.Fatalf("bad output %q: %v", out, err)
			}
			if len(got) != len(ref.GreedyIDs) {
				t.Fatalf("got %d tokens, want %d", len(got), len(ref.GreedyIDs))
			}
			for i, want := range ref.GreedyIDs {
				if ref.Margin[i] <= 1e-3 {
					break
				}
				if got[i] != want {
					t.Fatalf("step %d: got %d, want %d (all: %v)", i, got[i], want, got)
				}
			}
		})
	}
}

// Bad input: one line naming the problem and a non-zero exit.
func TestRunErrors(t *testing.T) {
	tmp := t.TempDir()
	noTok := filepath.Join(tmp, "notok")
	os.MkdirAll(noTok, 0o755)
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, _ := os.ReadFile(testdata + "tiny/llama-bf16/" + name)
		os.WriteFile(filepath.Join(noTok, name), b, 0o644)
	}
	unsupported := filepath.Join(tmp, "unsupported")
	os.MkdirAll(unsupported, 0o755)
	for _, name := range []string{"model.safetensors", "tokenizer.json"} {
		b, _ := os.ReadFile(testdata + "tiny/llama-bf16/" + name)
		os.WriteFile(filepath.Join(unsupported, name), b, 0o644)
	}
	os.WriteFile(filepath.Join(unsupported, "config.json"), []byte(`{"model_type":"mamba","hidden_size":64,"num_hidden_layers":1,
		"num_attention_heads":4,"vocab_size":512,"intermediate_size":128}`), 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing dir", []string{"run", "--model", filepath.Join(tmp, "nope")}, "nope"},
		{"no tokenizer", []string{"run", "--model", noTok}, "no tokenizer.json"},
		{"unsupported", []string{"run", "--model", unsupported}, `unsupported architecture "mamba"`},
		{"bad ids", []string{"run", "--prompt-ids", "1,x"}, "not an integer"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := mlxcel(t, tc.args...)
			if err == nil {
				t.Fatal("exit status 0")
			}
			if !strings.Contains(stderr, tc.want) {
				t.Fatalf("stderr %q does not mention %q", stderr, tc.want)
			}
			if tc.name != "unknown command" && strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("want one line, got %q", stderr)
			}
		})
	}
}
