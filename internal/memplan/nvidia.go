package memplan

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// nvidiaFree asks nvidia-smi for the free memory of the first device the
// process sees: the stand-in until the CUDA backend implements
// backend.MemoryReporter (its driver binding already loads
// cuMemGetInfo_v2). -1 when nvidia-smi is missing or says nothing usable.
func nvidiaFree() int64 {
	dev := "0"
	if v := strings.TrimSpace(strings.Split(os.Getenv("CUDA_VISIBLE_DEVICES"), ",")[0]); v != "" {
		dev = v // an index or a GPU-UUID, both of which -i takes
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nvidia-smi", "--query-gpu=memory.free", "--format=csv,noheader,nounits", "-i", dev).Output()
	if err != nil {
		return -1
	}
	return parseMiB(string(out))
}

// parseMiB reads nvidia-smi's first line, a count of MiB.
func parseMiB(s string) int64 {
	line := strings.TrimSpace(strings.SplitN(strings.TrimSpace(s), "\n", 2)[0])
	n, err := strconv.ParseInt(line, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n << 20
}
