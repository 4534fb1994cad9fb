package backend

// MemoryReporter is implemented by device backends that can say how much
// of their memory is free; the memory preflight (internal/memplan) checks
// a model against it before loading. Backends without it are checked
// against host memory (cpu) or not at all.
type MemoryReporter interface {
	// MemoryInfo returns free and total device memory in bytes.
	MemoryInfo() (free, total int64, err error)
}
