package app

import (
	"strings"
	"testing"
)

func TestLoadDefaultModel(t *testing.T) {
	l, err := Load(Options{Backend: "cpu", Quiet: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "stories260k" || l.Model.Vocab() != 512 || len(l.StopIDs) == 0 || l.StopIDs[0] != 2 {
		t.Fatalf("got %s vocab %d stops %v", l.Name, l.Model.Vocab(), l.StopIDs)
	}
}

// A profile serves synthetic weights of the real shapes with the family's
// real tokenizer, labelled as synthetic.
func TestLoadProfile(t *testing.T) {
	l, err := LoadProfile(ProfileOptions{Profile: "qwen2.5-0.5b-4bit", Backend: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if l.Name != "synthetic:qwen2.5-0.5b-4bit" || l.Model.Vocab() != 151936 || l.Tokenizer.VocabSize() < 151000 {
		t.Fatalf("got %s vocab %d tokenizer %d", l.Name, l.Model.Vocab(), l.Tokenizer.VocabSize())
	}
	if _, err := LoadProfile(ProfileOptions{Profile: "no-such-profile", Backend: "cpu"}); err == nil || !strings.Contains(err.Error(), "no-such-profile") {
		t.Fatalf("missing profile: %v", err)
	}
}
