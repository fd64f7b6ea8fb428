#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run it.
# Usage: bash scripts/test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

# System tools the tests use for real: git (the oracle for gitignore semantics).
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing system packages: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e '.[dev]'

export GIT_AUTHOR_NAME="guard tests" GIT_AUTHOR_EMAIL="tests@guard.invalid"
export GIT_COMMITTER_NAME="guard tests" GIT_COMMITTER_EMAIL="tests@guard.invalid"

.venv/bin/ruff check .
.venv/bin/mypy --strict guard
.venv/bin/python -m pytest -q "$@"
