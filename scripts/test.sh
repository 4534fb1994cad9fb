#!/usr/bin/env bash
# The project's test command (README): sets up what the tests need on a
# fresh Debian machine, then vets, lints (staticcheck), tests and briefly
# fuzzes everything. It needs ../shared/testdata beside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"

# Reference data: the tests compare against ../shared/testdata (made by HF
# transformers, ../shared/README.md) and fail without it, so stop here with
# one clear line instead. CI always has it.
if [ ! -d ../shared/testdata/models/stories260k ] || [ ! -d ../shared/testdata/tiny ]; then
  echo "test.sh: reference data missing: $(cd .. && pwd)/shared/testdata (the tests need it; see README)" >&2
  exit 1
fi

# The metrics test scrapes the server with a real Prometheus server.
if ! command -v prometheus >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null \
      || echo "test.sh: could not install prometheus; the Prometheus scrape test will fail" >&2
  fi
fi
# Debian's package starts a system service; the test runs its own server.
command -v systemctl >/dev/null 2>&1 && systemctl stop prometheus >/dev/null 2>&1 || true

test -z "$(gofmt -l $(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $(git ls-files '*.go'); exit 1; }
go vet ./...
# staticcheck (honnef.co/go/tools) at a pinned version, installed here into
# GOBIN (default $HOME/go/bin) unless that version is already there; it must
# report nothing.
STATICCHECK_VERSION=v0.8.2
sc_dir="$(go env GOBIN)"; [ -n "$sc_dir" ] || { sc_dir="$(go env GOPATH)"; sc_dir="${sc_dir%%:*}/bin"; }
if ! "$sc_dir/staticcheck" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})"; then
  go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
"$sc_dir/staticcheck" ./...
go test -timeout 30m ./...
# --- web chat page in a real browser (internal/webui/browser_test.go) ---
# Debian's chromium, node and npm; playwright-core from test/web
# (package-lock.json committed, node_modules ignored by git).
# -require-browser makes a missing browser fail here instead of skipping.
# Only what is missing is installed: a machine with another Node.js build
# (NodeSource's nodejs bundles npm and conflicts with Debian's npm package)
# keeps its node and gets only chromium.
web_pkgs=""
command -v chromium >/dev/null 2>&1 || web_pkgs="chromium"
command -v npm >/dev/null 2>&1 || web_pkgs="${web_pkgs:+$web_pkgs }nodejs npm"
if [ -n "$web_pkgs" ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $web_pkgs >/dev/null \
    || echo "test.sh: could not install $web_pkgs; the browser test will fail" >&2
fi
(cd test/web && npm ci --no-audit --no-fund --silent) || echo "test.sh: npm ci in test/web failed; the browser test will fail" >&2
go test -count=1 -run '^TestChatPageInBrowser$' ./internal/webui -require-browser
# --- end of the web chat page block ---
# The official JavaScript SDKs (openai, @anthropic-ai/sdk, ai) against the
# server (internal/server/node_sdk_test.go; test/sdk/package-lock.json).
(cd test/sdk && npm ci --no-audit --no-fund --silent) || echo "test.sh: npm ci in test/sdk failed; the SDK test will fail" >&2
go test -count=1 -run '^TestNodeSDKs$' ./internal/server -require-node
# Short fuzzing runs of the parsers: they must never panic. Counted in
# inputs, not seconds: a time budget that ends while the fuzzer minimizes a
# new input fails the run with "context deadline exceeded" (seen on a loaded
# 2-core machine), which says nothing about the parser.
go test -run '^$' -fuzz '^FuzzParseHeader$' -fuzztime 300000x ./internal/weights/
go test -run '^$' -fuzz '^FuzzParseConfig$' -fuzztime 300000x ./internal/weights/
go test -run '^$' -fuzz '^FuzzTokenizerJSON$' -fuzztime 6000x ./internal/tokenizer/
go test -run '^$' -fuzz '^FuzzChatTemplate$' -fuzztime 6000x ./internal/chat/
echo "test.sh: all tests passed"
