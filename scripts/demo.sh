#!/usr/bin/env bash
# Set up guard and show it working: the policy deciding scripted tool calls,
# then a scripted "naughty agent" trying to escape plan mode under `guard run`
# (namespaces, Landlock and the monitor) in a scratch git repository.
#
# What it leaves: the virtualenv .venv in this checkout (guard is installed
# there). Everything else -- the scratch repository, guard's data directory
# for the run (audit log, monitor baseline) -- lives in one temporary
# directory that is removed at the end; your own data directory is not used.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if ! command -v git >/dev/null 2>&1; then
  echo "installing git"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq git
fi
python3 -m venv .venv
.venv/bin/python -m pip install -q -e .

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# guard's data directory for this demo only (plans outside a repository, audit, baselines)
export XDG_DATA_HOME="$scratch/data"

echo "== 1. the policy evaluator: scripted tool calls for the plan and build agents"
.venv/bin/guard demo

echo
echo "== 2. guard run: a naughty agent in plan mode, confined by the kernel, watched by the monitor"
repo="$scratch/project"
mkdir -p "$repo/src"
printf 'print("hello")\n' > "$repo/src/app.py"
cp examples/naughty_agent.py "$repo/naughty_agent.py"
git -C "$repo" init -q
git -C "$repo" add -A
git -C "$repo" -c user.name=demo -c user.email=demo@guard.invalid commit -q -m "scratch project"
(cd "$repo" && "$root/.venv/bin/guard" run --agent plan -- python3 naughty_agent.py)

echo
echo "== guard is installed in $root/.venv; to run \`guard\` from this shell:"
echo
echo "  export PATH=\"$root/.venv/bin:\$PATH\""
