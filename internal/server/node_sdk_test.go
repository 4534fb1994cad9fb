package server

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The official JavaScript SDKs (npm openai, @anthropic-ai/sdk, ai with
// @ai-sdk/openai-compatible; test/sdk, package-lock.json committed) drive
// the server serving the scripted model: tool calls, runTools, Responses,
// Messages, generateText/streamText with tools. scripts/test.sh installs
// them and passes -require-node, so there a missing node or package fails;
// a plain go test without them skips, as the browser test does.
var requireNode = flag.Bool("require-node", false, "fail (not skip) the JavaScript SDK test when node or test/sdk's packages are missing")

func TestNodeSDKs(t *testing.T) {
	dir, _ := filepath.Abs("../../test/sdk")
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "openai"))
	if err != nil || modErr != nil {
		msg := "node or test/sdk/node_modules missing (run npm ci in test/sdk)"
		if *requireNode {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	s := startScripted(t, Options{})
	cmd := exec.Command(node, "sdk.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "BASE="+s.url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sdk.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
