//go:build linux

package cudalib

import (
	"os"
	"testing"
)

func TestLibraryDiscovery(t *testing.T) {
	// Pure Go: runs everywhere. An override that names a folder is searched.
	dir := t.TempDir()
	p := dir + "/libnvrtc.so.13"
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MLXCEL_NVRTC_LIB", dir)
	c := candidates(specNVRTC)
	if len(c) == 0 || c[0] != p {
		t.Fatalf("override folder not searched first: %v", c)
	}
	if !versionLess("/x/libnvrtc.so.12", "/x/libnvrtc.so.13.0") || versionLess("/x/libnvrtc.so.13", "/x/libnvrtc.so.12") {
		t.Fatal("versionLess")
	}
}
