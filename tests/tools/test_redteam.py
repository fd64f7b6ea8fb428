"""The red-team corpus (redteam.toml) through effects_for + the shipped default policy.

Each case is a tool call that tries to change something (or a legitimate call that
must keep working), with the decision expected for the shipped `plan` and `build`
agents. The acceptance bar: no plan-mode write or delete outside {plans}/*.md is
ever allowed.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

import pytest

from guard.analysis import DIALECTS, ToolInputError, effects_for
from guard.decide import Guard
from guard.effects import EffectKind
from guard.paths import canonicalize

SEVERITY = {"allow": 0, "ask": 1, "deny": 2}
CORPUS_FILE = Path(__file__).with_name("redteam.toml")
CASES: list[dict[str, Any]] = tomllib.loads(CORPUS_FILE.read_text(encoding="utf-8"))["case"]


def _call(case: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    if "bash" in case:
        command = case["bash"]
        if "pad" in case:
            command = ": " + "x" * int(case["pad"]) + "; " + command
        return "claude-code", "Bash", {"command": command}
    return case["dialect"], case["tool"], case["input"]


def _setup(root: Path, steps: list[str]) -> None:
    for step in steps:
        op, *args = step.split()
        if op == "file":
            (root / args[0]).parent.mkdir(parents=True, exist_ok=True)
            (root / args[0]).write_text("x\n")
        elif op == "dir":
            (root / args[0]).mkdir(parents=True, exist_ok=True)
        elif op == "symlink":
            os.symlink(args[1], root / args[0])
        elif op == "hardlink":
            os.link(root / args[1], root / args[0])
        else:
            raise AssertionError(f"unknown setup step {step!r}")


def test_corpus_is_large_and_well_formed() -> None:
    assert len(CASES) >= 200
    names = [c["attack"] for c in CASES]
    assert len(set(names)) == len(names), "attack names must be unique"
    for c in CASES:
        assert c["plan"] in ("allow", "ask", "deny", "error"), c
        assert c["build"] in ("allow", "ask", "deny", "error"), c
        assert "bash" in c or c.get("dialect") in DIALECTS, c
    dialects = {_call(c)[0] for c in CASES}
    assert dialects == set(DIALECTS)


@pytest.mark.parametrize("case", CASES, ids=[c["attack"] for c in CASES])
def test_redteam_case(case: dict[str, Any], worktree: Path) -> None:
    _setup(worktree, case.get("setup", []))
    dialect, tool, tool_input = _call(case)
    if case["plan"] == "error":
        with pytest.raises(ToolInputError):
            effects_for(dialect, tool, tool_input, str(worktree))
        return
    effects = effects_for(dialect, tool, tool_input, str(worktree))
    assert effects[0].kind is EffectKind.TOOL
    g = Guard.load("builtin:default", worktree=worktree)
    shown = "\n  ".join(f"{e}  ({e.detail})" for e in effects)
    for agent in ("plan", "build"):
        d = g.decide(agent, effects, worktree)
        got = d.action.value
        assert got == case[agent], (
            f"{case['attack']}: {agent} expected {case[agent]}, got {got}"
            f" ({d.reason}; rule {d.rule})\n  {shown}"
        )
        if agent == "plan" and d.allowed:
            _assert_only_plan_writes(g, effects, worktree, case["attack"])


def _assert_only_plan_writes(g: Guard, effects: list[Any], cwd: Path, attack: str) -> None:
    """Independent of the policy: an allowed plan-mode call writes only {plans}/*.md."""
    plans = str(g.roots.plans)
    for e in effects:
        if e.kind not in (EffectKind.WRITE, EffectKind.DELETE):
            continue
        assert e.target is not None, f"{attack}: unknown {e.kind} allowed in plan mode"
        canon = canonicalize(e.target, cwd)
        for path in canon.candidates:
            assert os.path.dirname(path) == plans and path.endswith(".md"), (
                f"{attack}: plan mode allowed {e.kind} of {path}"
            )
