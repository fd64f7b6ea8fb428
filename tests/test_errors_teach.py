"""Errors that teach: every policy problem at once, in line order, each line prefixed;
a missing key says "missing"; misspelt agents, hosts and commands get "did you mean"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.policy import PolicyError, load_policy

PREFIX = "guard: error: "


def guard(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ), check=False)


def test_policy_errors_are_all_reported_sorted_by_line_each_prefixed(tmp_path: Path) -> None:
    """Three mistakes, the first of them a misspelt built-in in extends (which used to hide
    the others): all three come out, in line order, each line with the prefix."""
    p = tmp_path / "policy.toml"
    p.write_text(
        "version = 1\n"
        'extends = ["builtin:defualt"]\n'
        "[agents.plan]\n"
        'mode = "plann"\n'
        'default = "deny"\n'
        "[agents.plan.writes]\n"
        'allow = ["a"]\n'
    )
    r = guard("check", "--policy", str(p), "write", "src/a.py", cwd=tmp_path)
    assert r.returncode == 2
    lines = r.stderr.splitlines()
    assert len(lines) == 3, r.stderr
    assert all(line.startswith(PREFIX + f"{p}:") for line in lines), r.stderr
    numbers = [int(line[len(PREFIX) + len(str(p)) + 1:].split(":")[0]) for line in lines]
    assert numbers == [2, 4, 6], r.stderr
    assert "did you mean 'default'?" in lines[0]
    assert "'plann'" in lines[1] and "did you mean 'write'?" in lines[2]


def test_errors_from_the_library_come_in_line_order(tmp_path: Path) -> None:
    p = tmp_path / "policy.toml"
    p.write_text(
        "version = 1\n[agents.plan]\nmode = \"plan\"\ndefault = \"maybe\"\n"
        "[agents.plan.write]\ndeny = 3\n[agents.plan.read]\nallow = 4\n"
    )
    with pytest.raises(PolicyError) as info:
        load_policy(str(p))
    lines = [int(x.split(":")[1]) for x in info.value.problems]
    assert lines == sorted(lines) and len(lines) == 3, info.value.problems


def test_a_missing_version_says_missing(tmp_path: Path) -> None:
    p = tmp_path / "policy.toml"
    p.write_text('[agents.plan]\nmode = "plan"\n')
    r = guard("check", "--policy", str(p), "--json", "write", "a", cwd=tmp_path)
    assert r.returncode == 2
    problems = json.loads(r.stderr)["problems"]
    assert problems == [
        f"{p}:1: version: missing; add `version = 1` at the top",
        f"{p}:1: agents.plan.default: required key is missing;"
        ' add `default = "deny"` (or "ask" / "allow")',
    ]
    assert "None" not in r.stderr


def test_a_broken_parent_does_not_invent_missing_keys(tmp_path: Path) -> None:
    """The keys a parent that did not load would have given are not reported as missing."""
    (tmp_path / "base.toml").write_text('version = 1\n[agents.plan]\nmode = "plan"\ndefault = 1\n')
    p = tmp_path / "policy.toml"
    p.write_text('version = 1\nextends = ["nope.toml", "base.toml"]\n[agents.plan.write]\n'
                 'deny = 5\n')
    with pytest.raises(PolicyError) as info:
        load_policy(str(p))
    text = "\n".join(info.value.problems)
    assert "nope.toml" in text and "does not exist" in text
    assert "agents.plan.default" in text and "agents.plan.write.deny" in text
    assert "missing" not in text


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["check", "--agent", "plann", "write", "a"], "did you mean 'plan'?"),
        (["explain", "--agent", "buld", "write", "a"], "did you mean 'build'?"),
        (["run", "--agent", "plann", "--", "true"], "did you mean 'plan'?"),
        (["install", "claud-code"], "did you mean 'claude-code'?"),
        (["hook", "codexx"], "did you mean 'codex'?"),
        (["chek", "write", "a"], "Did you mean 'check'"),
    ],
)
def test_misspelt_agents_hosts_and_commands_get_did_you_mean(
    repo: Path, args: list[str], hint: str
) -> None:
    r = guard(*args, cwd=repo)
    assert r.returncode == 2, r.stderr
    assert hint in r.stderr and r.stderr.startswith(PREFIX), r.stderr
    assert len(r.stderr.splitlines()) == 1
