"""Helpers for lint tests: complete a policy fragment, run the real CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from guard.lint import Finding, lint_paths


def complete(fragment: str) -> str:
    """A loadable policy from a fragment: version line and missing agent headers added."""
    text = fragment if re.search(r"^version\s*=", fragment, re.M) else "version = 1\n" + fragment
    for name in dict.fromkeys(re.findall(r"^\[agents\.([\w-]+)", fragment, re.M)):
        if not re.search(rf"^\[agents\.{re.escape(name)}\]", fragment, re.M):
            mode = "plan" if name == "plan" else "build"
            default = "deny" if mode == "plan" else "ask"
            text += f'\n[agents.{name}]\nmode = "{mode}"\ndefault = "{default}"\n'
    return text


def lint_text(tmp_path: Path, text: str, name: str = "policy.toml") -> list[Finding]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return lint_paths([str(path)]).findings


def codes(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings}


def guard(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
