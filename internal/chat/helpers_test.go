package chat

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Expected strings below were produced by CPython 3's repr / json.dumps.

func TestPyFloatRepr(t *testing.T) {
	cases := []struct {
		f    float64
		want string
	}{
		{0.0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1.0, "1.0"}, {-2.5, "-2.5"},
		{0.1, "0.1"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
		{1234567890123456.0, "1234567890123456.0"},
		{12345678901234567.0, "1.2345678901234568e+16"},
		{1e-4, "0.0001"}, {1e-5, "1e-05"}, {1.5e-7, "1.5e-07"},
		{123456.789, "123456.789"}, {math.Pi, "3.141592653589793"}, {1e22, "1e+22"},
		{5e-324, "5e-324"}, {math.MaxFloat64, "1.7976931348623157e+308"},
		{100.0, "100.0"}, {0.3, "0.3"}, {1 << 60, "1.152921504606847e+18"},
		{1.0 / 3, "0.3333333333333333"},
	}
	for _, c := range cases {
		if got := pyFloatRepr(c.f); got != c.want {
			t.Errorf("pyFloatRepr(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	for f, want := range map[float64]string{math.NaN(): "NaN", math.Inf(1): "Infinity", math.Inf(-1): "-Infinity"} {
		if got := pyFloatJSON(f); got != want {
			t.Errorf("pyFloatJSON(%v) = %q, want %q", f, got, want)
		}
	}
}

func renderOne(t *testing.T, src string, extra map[string]any) string {
	t.Helper()
	tmpl, err := Parse(src, "", "")
	must(t, err)
	out, err := tmpl.Render(nil, false, extra)
	must(t, err)
	return out
}

func TestToJSON(t *testing.T) {
	v := map[string]any{"x": rawJSON(`{"a":[1,{"b":[]},{}],"c":"é😀\u2028<&>\u0000\u007f"}`)}
	cases := []struct{ src, want string }{
		{`{{ x | tojson }}`, `{"a": [1, {"b": []}, {}], "c": "é😀` + "\u2028" + `<&>\u0000` + "\x7f" + `"}`},
		{`{{ x | tojson(ensure_ascii=true) }}`, `{"a": [1, {"b": []}, {}], "c": "\u00e9\ud83d\ude00\u2028<&>\u0000\u007f"}`},
		{`{{ x|tojson(indent=2, ensure_ascii=True) }}`, "{\n  \"a\": [\n    1,\n    {\n      \"b\": []\n    },\n    {}\n  ],\n  \"c\": \"\\u00e9\\ud83d\\ude00\\u2028<&>\\u0000\\u007f\"\n}"},
		{`{{ y | tojson(indent='\t', separators=(', ', ' = '), sort_keys=true) }}`, "{\n\t\"a\" = [\n\t\t1, \n\t\t2\n\t], \n\t\"b\" = 1\n}"},
		{`{{ y | tojson(separators=(',', ':')) }}`, `{"b":1,"a":[1,2]}`},
		{`{{ 'quote " back \\ nl' | tojson }}`, `"quote \" back \\ nl"`},
		{`{{ [1.0, 2, 0.5] | tojson }}`, `[1.0, 2, 0.5]`},
		{`{% macro m(v) %}{{ v | tojson }}{% endmacro %}{{ m(y) }}`, `{"b": 1, "a": [1, 2]}`},
		// Not a filter application: left alone.
		{`| tojson {{ "| tojson" }}{# | tojson #}`, `| tojson | tojson`},
	}
	for _, c := range cases {
		got := renderOne(t, c.src, map[string]any{"x": v["x"], "y": rawJSON(`{"b":1,"a":[1,2]}`)})
		if got != c.want {
			t.Errorf("%s\n got: %q\nwant: %q", c.src, got, c.want)
		}
	}
	tmpl, err := Parse(`{{ nope | tojson }}`, "", "")
	must(t, err)
	if _, err := tmpl.Render(nil, false, nil); err == nil {
		t.Error("tojson of an undefined value should fail as json.dumps does")
	}
}

func TestPrepareSourceErrors(t *testing.T) {
	for src, want := range map[string]string{
		"a\n{{ x ":                   "line 2: unclosed tag",
		"{% if x == 'a %}":           "line 1: unterminated string",
		"{# never closed":            "missing end of comment",
		"x\n{% raw %}{{ y }}":        "line 2: missing end of raw",
		`{{ '\x4' }}`:                "\\x escape",
		`{{ '\uzzzz' }}`:             "invalid \\u escape",
		"{% if true %}ok{% endif %}": "",
	} {
		_, err := prepareSource(src)
		switch {
		case want == "" && err != nil:
			t.Errorf("%q: unexpected error %v", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
	// Parse surfaces these errors too.
	if _, err := Parse("{{ x", "", ""); err == nil || !strings.Contains(err.Error(), "unclosed tag") {
		t.Errorf("Parse: got %v", err)
	}
}

func TestStrftime(t *testing.T) {
	// Python: datetime(2024, 7, 6, 0, 5, 9, 123456).strftime(...)
	at := time.Date(2024, 7, 6, 0, 5, 9, 123456000, time.UTC)
	cases := map[string]string{
		"%d %b %Y":            "06 Jul 2024",
		"%-d %B %Y":           "6 July 2024",
		"%A %a %e|%H:%M:%S":   "Saturday Sat  6|00:05:09",
		"%I%p %j %y %m %f":    "12AM 188 24 07 123456",
		"%c|%x|%X|%F|%D":      "Sat Jul  6 00:05:09 2024|07/06/24|00:05:09|2024-07-06|07/06/24",
		"%z|%Z|%q|100% 2006%": "||%q|100% 2006%",
		"%w %u":               "6 6",
	}
	for f, want := range cases {
		if got := pyStrftime(at, f); got != want {
			t.Errorf("pyStrftime(%q) = %q, want %q", f, got, want)
		}
	}
	if got := pyStrftime(time.Date(2024, 7, 7, 13, 0, 0, 0, time.UTC), "%I %p %w %u"); got != "01 PM 0 7" {
		t.Errorf("afternoon Sunday: got %q", got)
	}
}

func TestValueConversion(t *testing.T) {
	type tool struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
			Desc string `json:"description"`
		} `json:"function"`
	}
	var tl tool
	tl.Type, tl.Function.Name, tl.Function.Desc = "function", "f", "does f"
	extra := map[string]any{
		"s":   tl,
		"m":   map[string]string{"text": "t", "type": "text", "id": "7"},
		"n":   []int{1, 2},
		"f":   []float64{2, 2.5, math.Copysign(0, -1)},
		"num": []any{rawNumber("3"), rawNumber("3.0"), uint64(math.MaxUint64)},
		"p":   (*tool)(nil),
	}
	got := renderOne(t, `{{ s | tojson }} {{ m | tojson }} {{ n | tojson }} {{ f | tojson }} {{ num | tojson }} {{ p | tojson }}`, extra)
	want := `{"type": "function", "function": {"name": "f", "description": "does f"}} {"id": "7", "type": "text", "text": "t"} [1, 2] [2, 2.5, -0.0] [3, 3.0, 1.8446744073709552e+19] null`
	if got != want {
		t.Errorf("\n got: %s\nwant: %s", got, want)
	}
	if !strings.Contains(renderOne(t, `{{ x is mapping }}`, map[string]any{"x": rawJSON(`{"a":1}`)}), "True") {
		t.Error("raw JSON object should be a mapping")
	}
}

func rawJSON(s string) json.RawMessage { return json.RawMessage(s) }

func rawNumber(s string) json.Number { return json.Number(s) }

// FuzzPrepareSource checks that the lexing pass never panics and is
// deterministic, and that whatever it lets through renders without a panic.
func FuzzPrepareSource(f *testing.F) {
	for _, name := range []string{"gemma3.jinja", "llama3_1.jinja", "mistral_v1.jinja", "qwen2_5.jinja", "qwen3.jinja"} {
		b, err := os.ReadFile(filepath.Join(sharedTemplates, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("{%- raw -%} {{ x }} {%+ endraw %}{#- c -#}{{ {'a': {}} | tojson(indent=2) }}")
	f.Fuzz(func(t *testing.T, src string) {
		out, err := prepareSource(src)
		if err != nil {
			return
		}
		if again, _ := prepareSource(src); again != out {
			t.Fatal("prepareSource is not deterministic")
		}
		if tmpl, err := Parse(src, "<s>", "</s>"); err == nil {
			_, _ = tmpl.Render([]Message{{Role: "user", Content: "hi"}}, true, nil)
		}
	})
}
