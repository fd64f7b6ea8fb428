"""Helpers for the sandbox tests: a real git worktree and ways to run confined code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from guard.sandbox import confine, landlock

ABI = landlock.abi_version()
needs_landlock = pytest.mark.skipif(
    ABI < 1, reason=f"the kernel has no Landlock here: {landlock.unavailable_reason()}"
)


@dataclass
class Tree:
    worktree: Path
    plans: Path
    victim: Path  # a tracked project file the plan agent must not change
    plan_file: Path  # an existing plan file
    outside: Path  # a directory outside the worktree


def make_tree(tmp_path: Path) -> Tree:
    wt = tmp_path / "project"
    (wt / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(wt)], check=True)
    victim = wt / "src" / "app.py"
    victim.write_text("print('original')\n")
    plans = wt / ".openoxide" / "plans"
    plans.mkdir(parents=True)
    plan_file = plans / "20260101-s1-plan.md"
    plan_file.write_text("# plan\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    return Tree(wt.resolve(), plans.resolve(), victim.resolve(), plan_file.resolve(), outside)


def helper_argv(writable: Sequence[str | Path], command: Sequence[str], *extra: str) -> list[str]:
    argv = [sys.executable, "-E", "-s", "-S", confine.HELPER]
    for w in writable:
        argv += ["--write", str(w)]
    return [*argv, *extra, "--", *command]


# A confined Python snippet reports what happened as one JSON line:
# {"ok": true} or {"ok": false, "errno": "EACCES"}.
_PROBE = textwrap.dedent(
    """
    import errno, json, os, sys
    def attempt():
    {body}
    try:
        attempt()
        print(json.dumps({{"ok": True}}))
    except OSError as exc:
        print(json.dumps({{"ok": False, "errno": errno.errorcode.get(exc.errno, str(exc.errno))}}))
    """
)


def probe_source(body: str) -> str:
    return _PROBE.format(body=textwrap.indent(textwrap.dedent(body).strip(), "    "))


def confined_probe(
    writable: Sequence[str | Path], body: str, *extra: str, cwd: Path | None = None
) -> dict[str, object]:
    """Run ``body`` (a Python function body) under the Landlock helper; its outcome."""
    proc = subprocess.run(
        helper_argv(writable, [sys.executable, "-c", probe_source(body)], *extra),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


#: The test-only entry point that turns the walls' test switches on (guard reads none
#: from the environment).
SWITCHED = Path(__file__).resolve().parent.parent / "switched.py"


def guard_argv(*args: str, switches: Sequence[str] = ()) -> list[str]:
    """``python -m guard ARGS``; with ``switches`` (``no-namespaces``, ``no-walls``) on,
    through the test-only entry point."""
    if switches:
        return [sys.executable, str(SWITCHED), *(f"--{s}" for s in switches), "guard", *args]
    return [sys.executable, "-m", "guard", *args]


def switches_on(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Turn the walls' test switches on in this process for one test."""
    from guard.sandbox import confine

    monkeypatch.setattr(confine, "_switches", frozenset())
    confine.set_test_switches(*names)


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUARD_")}
    env.update(extra)
    return env
