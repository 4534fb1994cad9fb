//go:build amd64 && !purego

package qmat

//go:generate go run asmgen.go

// The module carries no golang.org/x/sys dependency, so the feature probe
// is a few lines of CPUID here.

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
func xgetbv0() (eax uint32)

// hasAVX2FMA reports AVX, AVX2, FMA and F16C with the OS saving YMM state:
// everything the kernels use (F16C for f16 scales).
func hasAVX2FMA() bool {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const (
		fma     = 1 << 12
		osxsave = 1 << 27
		avx     = 1 << 28
		f16c    = 1 << 29
	)
	if ecx1&(fma|osxsave|avx|f16c) != fma|osxsave|avx|f16c {
		return false
	}
	// XCR0 bits 1 (SSE) and 2 (AVX): the OS saves YMM registers.
	if xgetbv0()&6 != 6 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<5) != 0
}

func init() {
	useAsm = hasAVX2FMA()
	asmAvailable = useAsm
}
