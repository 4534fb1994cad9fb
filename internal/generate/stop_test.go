package generate

import (
	"strings"
	"testing"
)

func TestStopStringAcrossTokens(t *testing.T) {
	for _, tc := range []struct {
		pieces  []string
		stops   []string
		want    string
		hit     bool
		matched string
	}{
		{[]string{"Hel", "lo wo", "rld"}, []string{"o w"}, "Hell", true, "o w"},
		{[]string{"a", "b", "c"}, []string{"bc"}, "a", true, "bc"},
		{[]string{"abc", "d"}, []string{"xyz"}, "abcd", false, ""},
		{[]string{"ab", "ab", "c"}, []string{"abc"}, "ab", true, "abc"},
		{[]string{"The end", "."}, []string{"end.", "The"}, "", true, "The"},
		{[]string{"x<", "/s", "x"}, []string{"</s>"}, "x</sx", false, ""},
	} {
		m := &stopMatcher{stops: tc.stops}
		var out strings.Builder
		hit := false
		for _, p := range tc.pieces {
			o, h := m.push(p)
			out.WriteString(o)
			// Never show a prefix of a stop string that might complete.
			if h {
				hit = true
				break
			}
		}
		if !hit {
			out.WriteString(m.flush())
		}
		if out.String() != tc.want || hit != tc.hit || m.matched != tc.matched {
			t.Errorf("%q stops %q: got %q hit=%v, want %q hit=%v", tc.pieces, tc.stops, out.String(), hit, tc.want, tc.hit)
		}
	}
}

func TestStopMatcherHoldsBackOnlyPossiblePrefixes(t *testing.T) {
	m := &stopMatcher{stops: []string{"STOP"}}
	if o, _ := m.push("abcST"); o != "abc" {
		t.Fatalf("got %q", o)
	}
	if o, _ := m.push("x"); o != "STx" {
		t.Fatalf("got %q", o)
	}
}
