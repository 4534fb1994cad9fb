package backend

import "testing"

type freeingBackend struct {
	Backend
	freed []KVStore
}

func (f *freeingBackend) FreeKVStore(kv KVStore) error {
	f.freed = append(f.freed, kv)
	return nil
}

type specOnly struct{ KVSpec }

func (s specOnly) Spec() KVSpec { return s.KVSpec }

// FreeKVStore hands the store to a backend that can free it and leaves it
// alone (no error) on one that cannot.
func TestFreeKVStore(t *testing.T) {
	f := &freeingBackend{}
	kv := &specOnly{KVSpec{NumBlocks: 3, BlockSize: 16}}
	if err := FreeKVStore(f, kv); err != nil || len(f.freed) != 1 || f.freed[0] != KVStore(kv) {
		t.Fatalf("freeing backend: err %v, freed %v", err, f.freed)
	}
	var plain struct{ Backend }
	if err := FreeKVStore(plain, kv); err != nil {
		t.Fatalf("backend without KVFreer: %v", err)
	}
}
