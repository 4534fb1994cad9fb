package server

import (
	"fmt"

	"github.com/mlxcel/mlxcel/internal/app"
	"github.com/mlxcel/mlxcel/internal/backend"
	"github.com/mlxcel/mlxcel/internal/engine"
	"github.com/mlxcel/mlxcel/internal/memplan"
)

// DefaultGPUMemoryUtilization is the share of the device's memory the
// server plans to use (vLLM's gpu_memory_utilization default): weights,
// KV cache and activations together; the rest is left to the driver,
// cuBLAS and other processes.
const DefaultGPUMemoryUtilization = 0.9

// MaxAutoParallel caps the slots the server sizes from memory (vLLM's
// max_num_seqs default).
const MaxAutoParallel = 256

// kvFromDeviceMemory sizes the KV cache of a device backend that reports
// its memory: what --gpu-memory-utilization of the device leaves after the
// loaded weights (and anything else already using it) and one prefill
// step's activations, in blocks of sizing.BlockSize tokens at
// sizing.KVDtype. With sizing.Parallel 0 it also picks the slots: as many
// as the cache holds sequences of min(context, DefaultKVTokensPerSeq)
// tokens, 1 to MaxAutoParallel. ok is false when the backend runs on the
// host or cannot say.
func kvFromDeviceMemory(l *app.Loaded, util float64, sizing engine.Config, ctx int) (blocks, slots int, note string, ok bool, err error) {
	return kvSizeOn(l, l.Model.Backend(), util, sizing, ctx)
}

// kvSizeOn is kvFromDeviceMemory on backend be (tests pass a stand-in).
func kvSizeOn(l *app.Loaded, be backend.Backend, util float64, sizing engine.Config, ctx int) (blocks, slots int, note string, ok bool, err error) {
	blockSize, parallel, chunk := sizing.BlockSize, sizing.Parallel, sizing.PrefillChunk
	mr, isMR := be.(backend.MemoryReporter)
	if !backend.IsAccelerator(be) || !isMR {
		return 0, 0, "", false, nil
	}
	free, total, err := mr.MemoryInfo()
	if err != nil {
		return 0, 0, "", false, nil // sized the host's way
	}
	if util <= 0 || util > 1 {
		return 0, 0, "", false, fmt.Errorf("--gpu-memory-utilization %g: want a fraction in (0, 1]", util)
	}
	// A step holds a prefill chunk plus a decode row for every slot (the
	// engine's default MaxBatchTokens).
	stepTokens := chunk + parallel
	if parallel <= 0 {
		stepTokens = chunk + MaxAutoParallel
	}
	act := memplan.New(l.Model.Cfg, be, 0, stepTokens).ActBytes
	budget := int64(util*float64(total)) - (total - free) - act
	layers := l.Model.KVLayers()
	within := func(slots int) int {
		c := sizing
		c.Parallel = slots
		return engine.KVBlocksWithin(be, c, layers, budget)
	}
	slots = parallel
	if slots <= 0 {
		// As many slots as the cache holds sequences, each slot's
		// recurrent state and rings counted beside its blocks.
		perSeq := (min(ctx, DefaultKVTokensPerSeq) + blockSize - 1) / blockSize
		slots = 1
		for s := MaxAutoParallel; s > 1; s-- {
			if within(s) >= s*perSeq {
				slots = s
				break
			}
		}
	}
	blocks = within(slots)
	if blocks < 1 {
		return 0, 0, "", false, fmt.Errorf("server: %s of the device's %s (--gpu-memory-utilization %g) leaves no room for a KV block after the "+
			"%s in use, %s of activations and the per-slot state of %d slots; raise --gpu-memory-utilization or pass --kv-mem",
			byteSize(int64(util*float64(total))), byteSize(total), util, byteSize(total-free), byteSize(act), slots)
	}
	sizing.NumBlocks, sizing.Parallel = blocks, slots
	kv := backend.KVStoreBytes(be, engine.KVSpec(be, sizing, layers))
	note = fmt.Sprintf("KV cache %d blocks of %d tokens (%s) from %.0f%% of %s (%s in use, %s kept for activations); %d parallel slots",
		blocks, blockSize, byteSize(kv), util*100, byteSize(total), byteSize(total-free), byteSize(act), slots)
	return blocks, slots, note, true, nil
}
