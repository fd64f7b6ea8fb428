#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Usage: bash scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the tests use for real: git (the oracle for gitignore semantics),
# bash, node and npm (the real MCP filesystem server and host agents' CLIs).
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
# libseccomp2: the oracle the sandbox tests check guard's syscall table against
ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2' || missing+=(libseccomp2)
# chromium: headless, renders the HTML reports of `guard replay` and `guard review --fleet`
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# the walls' tests: util-linux's setpriv/unshare/prlimit (uid 65534, limits of a victim),
# tmux (the user's tmux server as a target); the confinement benchmark compares against
# bubblewrap, and Anthropic's sandbox-runtime needs bwrap, socat and ripgrep
command -v setpriv >/dev/null 2>&1 || missing+=(util-linux)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v socat >/dev/null 2>&1 || missing+=(socat)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
# the egress proxy's tests drive real clients through it: curl, openssl (s_client and
# test certificates), git's http-backend (in git); unshare and setpriv (util-linux)
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
# rsyslog and its RELP modules: the fleet tests ship records through real rsyslogd
# processes (edge -> RELP -> central), each started by the test with its own configuration
command -v rsyslogd >/dev/null 2>&1 || [ -x /usr/sbin/rsyslogd ] || missing+=(rsyslog)
ls /usr/lib/*/rsyslog/omrelp.so >/dev/null 2>&1 || missing+=(rsyslog-relp)
# golang-go: tests/e2e/test_mcp_parsers.py builds an MCP server on Go's standard library
# (encoding/json matches keys without regard to case) with `go build`, offline
command -v go >/dev/null 2>&1 || missing+=(golang-go)
# dash and a C compiler: tests/tools/test_grammar.py runs every sentence of guard's shell
# grammar under bash and dash with an argv recorder it compiles
command -v dash >/dev/null 2>&1 || missing+=(dash)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[dev]'

# npm packages for end-to-end tests, pinned, installed once into a cache
MCP_FS_VERSION=2026.8.31
export GUARD_MCP_FS_DIR="${GUARD_MCP_FS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/openoxide-guard-tests/server-filesystem-$MCP_FS_VERSION}"
if [ ! -x "$GUARD_MCP_FS_DIR/node_modules/.bin/mcp-server-filesystem" ]; then
  echo "installing @modelcontextprotocol/server-filesystem@$MCP_FS_VERSION into $GUARD_MCP_FS_DIR"
  npm install --prefix "$GUARD_MCP_FS_DIR" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-filesystem@$MCP_FS_VERSION"
fi

CLAUDE_CODE_VERSION=2.1.332
export GUARD_E2E_PREFIX="${GUARD_E2E_PREFIX:-${XDG_CACHE_HOME:-$HOME/.cache}/openoxide-guard/claude-code-$CLAUDE_CODE_VERSION}"
if [ ! -x "$GUARD_E2E_PREFIX/node_modules/.bin/claude" ]; then
  echo "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION into $GUARD_E2E_PREFIX"
  npm install --prefix "$GUARD_E2E_PREFIX" --no-audit --no-fund --loglevel=error \
    "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION"
fi

# Host CLIs driven end to end (tests/e2e/), pinned, each in its own folder of the cache.
# The tests install them the same way when missing; in CI (CI=true) a failed install fails.
E2E_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/openoxide-guard"
npm_host() {  # folder version package binary
  if [ ! -x "$E2E_CACHE/$1-$2/node_modules/.bin/$4" ]; then
    echo "installing $3@$2 into $E2E_CACHE/$1-$2"
    npm install --prefix "$E2E_CACHE/$1-$2" --no-audit --no-fund --loglevel=error "$3@$2"
  fi
}
npm_host codex 0.171.0 @openai/codex codex
# the peer sandbox benchmarks/confine.py measures guard against (with codex sandbox)
npm_host sandbox-runtime 0.0.78 @anthropic-ai/sandbox-runtime srt
npm_host gemini-cli 0.61.0 @google/gemini-cli gemini
npm_host opencode 1.18.33 opencode-ai opencode
AIDER_VERSION=0.86.2
if [ ! -x "$E2E_CACHE/aider-$AIDER_VERSION/bin/aider" ]; then
  echo "installing aider-chat==$AIDER_VERSION into its own venv $E2E_CACHE/aider-$AIDER_VERSION"
  python3 -m venv "$E2E_CACHE/aider-$AIDER_VERSION"
  "$E2E_CACHE/aider-$AIDER_VERSION/bin/python" -m pip install -q "aider-chat==$AIDER_VERSION"
fi

export GIT_AUTHOR_NAME="guard tests" GIT_AUTHOR_EMAIL="tests@guard.invalid"
export GIT_COMMITTER_NAME="guard tests" GIT_COMMITTER_EMAIL="tests@guard.invalid"

.venv/bin/ruff check .
.venv/bin/mypy --strict guard
.venv/bin/guard lint policies/
.venv/bin/python -m pytest -q "$@"
