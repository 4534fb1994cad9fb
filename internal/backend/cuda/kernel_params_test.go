//go:build linux

package cuda

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// kernelSignatures runs the C preprocessor over the embedded kernel source
// (NVRTC sees the same text: the files have no #include) and returns every
// extern "C" kernel's parameter kinds, the macro-generated kernels
// included. Types: pointers (any), int, long long, float.
func kernelSignatures(t *testing.T) map[string][]argKind {
	t.Helper()
	cmd := exec.Command("cpp", "-P", "-x", "c++", "-")
	cmd.Stdin = strings.NewReader(kernelSource())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cpp (gcc's preprocessor, on every CI machine) over the kernel source: %v", err)
	}
	src := regexp.MustCompile(`\s+`).ReplaceAllString(string(out), " ")
	entry := regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__ ?\((?:[^()]|\([^()]*\))*\) )?(\w+) ?\(([^)]*)\)`)
	sigs := map[string][]argKind{}
	for _, m := range entry.FindAllStringSubmatch(src, -1) {
		var kinds []argKind
		for _, p := range strings.Split(m[2], ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
				continue
			case strings.Contains(p, "*"):
				kinds = append(kinds, argPtr)
			case strings.HasPrefix(p, "long long ") || strings.HasPrefix(p, "const long long "):
				kinds = append(kinds, argI64)
			case strings.HasPrefix(p, "int ") || strings.HasPrefix(p, "const int "):
				kinds = append(kinds, argI32)
			case strings.HasPrefix(p, "float ") || strings.HasPrefix(p, "const float "):
				kinds = append(kinds, argF32)
			default:
				t.Fatalf("kernel %s: parameter %q of a type the launch builder has no kind for", m[1], p)
			}
		}
		sigs[m[1]] = kinds
	}
	return sigs
}

// TestKernelNamesMatchSource: the names resolved at start are exactly the
// kernels the (preprocessed) source defines.
func TestKernelNamesMatchSource(t *testing.T) {
	sigs := kernelSignatures(t)
	names := map[string]bool{}
	for _, n := range kernelNames() {
		names[n] = true
		if _, ok := sigs[n]; !ok {
			t.Errorf("kernelNames lists %s, which the source does not define", n)
		}
	}
	for n := range sigs {
		if !names[n] {
			t.Errorf("the source defines %s, which kernelNames does not list (New would not resolve it)", n)
		}
	}
}

// TestLaunchSignatures checks, without a GPU, that every launch the
// Llama-3.1-8B and Qwen3-30B-A3B decode steps record passes its kernel's
// parameters in number and kind: a kernel's parameter list and the Go code
// that fills it are edited apart, and a mismatch would only show on the
// device, as garbage arguments.
func TestLaunchSignatures(t *testing.T) {
	sigs := kernelSignatures(t)
	for _, c := range []struct {
		name, model string
		set         func(b *Backend)
	}{
		{"llama", "llama", func(*Backend) {}},
		{"qwen3", "qwen3", func(*Backend) {}},
		{"qwen3 ticket merge", "qwen3", func(b *Backend) { b.DecClusterMax = 0 }},
		{"qwen3 whole groups", "qwen3", func(b *Backend) { b.DecHeads = 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := hostOnlyBackend()
			c.set(b)
			recordModelStep(b, c.model, 2)
			checkLaunchArgs(t, sigs, b)
		})
	}
}

// checkLaunchArgs checks every launch b has recorded against its kernel's
// parameter kinds.
func checkLaunchArgs(t *testing.T, sigs map[string][]argKind, b *Backend) {
	t.Helper()
	checked := 0
	for i, name := range launchNames(b) {
		l := &b.rec.ls[i]
		if l.fn == fnGemm {
			continue
		}
		want, ok := sigs[name]
		if !ok {
			t.Fatalf("launch %d: kernel %q not in the source", i, name)
		}
		checked++
		if int(l.n) != len(want) {
			t.Errorf("launch %d: %s with %d arguments, its kernel declares %d", i, name, l.n, len(want))
			continue
		}
		for a, k := range want {
			if l.kind(a) != k {
				t.Errorf("launch %d: %s argument %d passed as kind %d, declared %d", i, name, a, l.kind(a), k)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no launch checked")
	}
	t.Logf("%d launches checked", checked)
}
