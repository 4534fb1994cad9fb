package memplan

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// HostMemory returns the memory this process may still use: the lesser of
// MemAvailable (physical RAM not in use) and the cgroup's remaining limit.
func HostMemory() (int64, string) {
	avail, src := int64(-1), ""
	if v := meminfo("MemAvailable"); v > 0 {
		avail, src = v, "MemAvailable"
	} else if v := meminfo("MemTotal"); v > 0 {
		avail, src = v, "MemTotal"
	}
	if limit := cgroupRemaining(); limit > 0 && (avail < 0 || limit < avail) {
		avail, src = limit, "cgroup memory.max"
	}
	return avail, src
}

func meminfo(key string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			return -1
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return -1
		}
		if len(fs) > 1 && fs[1] == "kB" {
			n *= 1024
		}
		return n
	}
	return -1
}

func cgroupRemaining() int64 {
	read := func(p string) int64 {
		b, err := os.ReadFile(p)
		if err != nil {
			return -1
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			return -1 // "max": no limit
		}
		return n
	}
	limit, used := read("/sys/fs/cgroup/memory.max"), read("/sys/fs/cgroup/memory.current")
	if limit <= 0 || used < 0 {
		return -1
	}
	return max(limit-used, 0)
}
