package weights

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestFIFOSafetensors: a named pipe as model.safetensors fails at once,
// naming the file, instead of blocking in open until a writer comes.
func TestFIFOSafetensors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		ck, err := Open(dir, QuantConfig{})
		if err == nil {
			ck.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
			t.Fatalf("error %v, want one naming %s as a named pipe", err, p)
		}
	case <-time.After(5 * time.Second):
		os.WriteFile(p, nil, 0) // unblock the open
		t.Fatal("opening a FIFO as safetensors hangs")
	}
	if err := CheckModelFiles(dir); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("CheckModelFiles: %v", err)
	}
	cfg := filepath.Join(dir, "config.json")
	if err := syscall.Mkfifo(cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(dir); err == nil || !strings.Contains(err.Error(), cfg) {
		t.Errorf("FIFO config.json: %v", err)
	}
}

// TestNonsenseConfigValues: values that are present but make no sense
// fail validation with the key's name rather than becoming defaults.
func TestNonsenseConfigValues(t *testing.T) {
	base := `"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":512,"intermediate_size":128`
	for _, tc := range []struct{ extra, key string }{
		{`"max_position_embeddings":0`, "max_position_embeddings"},
		{`"max_position_embeddings":-5`, "max_position_embeddings"},
		{`"head_dim":0`, "head_dim"},
		{`"rms_norm_eps":-1`, "rms_norm_eps"},
		{`"rope_theta":0`, "rope_theta"},
		{`"sliding_window":-1`, "sliding_window"},
		{`"num_experts":4,"num_experts_per_tok":8`, "num_experts_per_tok"},
	} {
		c, err := ParseConfig([]byte("{" + base + "," + tc.extra + "}"))
		if err == nil {
			err = c.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want an error naming %s", tc.extra, err, tc.key)
		}
	}
	c, err := ParseConfig([]byte("{" + base + "}"))
	if err != nil || c.Validate() != nil {
		t.Fatalf("a sane config: %v %v", err, c.Validate())
	}
}
