package settings

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var varName = regexp.MustCompile(`MLXCEL_[A-Z0-9_]*[A-Z0-9]`)

// TestDocsListTheTable: docs/settings.md names exactly the table's
// variables, each with its kind.
func TestDocsListTheTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	var inDoc []string
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "| `MLXCEL_") {
			inDoc = append(inDoc, varName.FindString(line))
		}
	}
	var inCode []string
	for _, v := range Table {
		inCode = append(inCode, v.Name)
		if !strings.Contains(string(doc), "| `"+v.Name+"` | "+string(v.Kind)+" |") {
			t.Errorf("docs/settings.md: no row `%s` | %s |", v.Name, v.Kind)
		}
	}
	slices.Sort(inDoc)
	slices.Sort(inCode)
	if !slices.Equal(inDoc, inCode) {
		t.Errorf("docs/settings.md lists %v, the table %v", inDoc, inCode)
	}
	if len(Table) > 15 {
		t.Errorf("%d variables: the product reads at most 15", len(Table))
	}
}

// TestOnlyThroughTheTable: no product file outside this package names an
// MLXCEL_* variable the table lacks, and none reads the environment for
// one directly.
func TestOnlyThroughTheTable(t *testing.T) {
	out, err := exec.Command("git", "-C", "../..", "ls-files", "*.go").Output()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, v := range Table {
		known[v.Name] = true
	}
	direct := regexp.MustCompile(`os\.(Getenv|LookupEnv)\("MLXCEL_`)
	for _, f := range strings.Fields(string(out)) {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "internal/settings/") {
			continue
		}
		src, err := os.ReadFile("../../" + f)
		if err != nil {
			continue // deleted in the working tree
		}
		if direct.Match(src) {
			t.Errorf("%s reads an MLXCEL_* variable directly: use settings.Get", f)
		}
		for _, n := range varName.FindAllString(string(src), -1) {
			if !known[n] {
				t.Errorf("%s names %s, which is not in the settings table", f, n)
			}
		}
	}
}

func TestGetPanicsOnUnknown(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Get of a name outside the table did not panic")
		}
	}()
	Get("MLXCEL_NOT_A_SETTING")
}
