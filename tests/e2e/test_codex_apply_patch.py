# ruff: noqa: F811  (the fixture codex comes from test_codex_cli)
"""apply_patch read as Codex reads it: guard's reading against the real Codex (pinned).

Codex's binary applies a patch itself when started under the name ``apply_patch``. A
seeded generator builds patches from the pieces that decide where a patch writes
(headers at column 0, indented, padded, after content lines that look like headers,
``*** Move to:`` lines, wrapped in ``<<EOF``), each is applied by real Codex in a
scratch directory, and every file it changed must be one guard's reading names; a
patch guard cannot name (an unknown write) is refused in plan mode whatever it does.
"""

from __future__ import annotations

import os
import random
import subprocess
from pathlib import Path

from guard.analysis.shell.patch import parse_patch
from guard.effects import EffectKind

from .test_codex_cli import codex  # noqa: F401  (fixture)

FILES = ("a.txt", "src/app.py", "README.md", "plans/p.md")


PATHS = (*FILES, "src/new.py", "plans/q.md", "b.txt")


def _hunk(rnd: random.Random) -> list[str]:
    op = rnd.choice(["Add", "Update", "Delete"])
    path = rnd.choice(PATHS)
    if op == "Add":
        return [f"*** Add File: {path}", *rnd.choice([["+x"], ["+a", "+*** Delete File: README.md"],
                                                      ["+"]])]
    if op == "Delete":
        return [f"*** Delete File: {path}"]
    out = [f"*** Update File: {path}"]
    if rnd.random() < 0.3:
        out.append(f"*** Move to: {rnd.choice(PATHS)}")
    out += rnd.choice([["@@", "-old", "+new"], ["-old", "+new"], ["@@", " old", "+x"],
                       ["@@", "-old", "+new", "*** End of File"],
                       ["@@", "-old", "+new", " *** Delete File: README.md"]])
    return out


def _mutate(rnd: random.Random, lines: list[str]) -> list[str]:
    """One change of the kind two readings could disagree on."""
    i = rnd.randrange(len(lines))
    kind = rnd.choice(["indent", "pad", "nbsp", "insert", "tab"])
    if kind == "indent":
        lines[i] = rnd.choice([" ", "  ", "\t"]) + lines[i]
    elif kind == "pad":
        lines[i] = lines[i] + rnd.choice([" ", "\t"])
    elif kind == "nbsp":
        lines[i] = "\u00a0" + lines[i]
    elif kind == "tab":
        lines[i] = lines[i].replace(": ", ":\t", 1)
    else:
        lines.insert(i, rnd.choice(["  *** Add File: src/pwned.py", " *** Delete File: README.md",
                                    "", "*** Move to: src/moved.py"]))
    return lines


def generate(rnd: random.Random) -> str:
    hunks = [line for _ in range(rnd.randint(1, 3)) for line in _hunk(rnd)]
    lines = ["*** Begin Patch", *hunks, "*** End Patch"]
    for _ in range(rnd.choice([0, 0, 1, 2])):
        lines = _mutate(rnd, lines)
    body = "\n".join(lines) + "\n"
    if rnd.random() < 0.05:
        body = "<<'EOF'\n" + body + "EOF\n"
    return body


def scratch(where: Path) -> Path:
    (where / "src").mkdir(parents=True)
    (where / "plans").mkdir()
    for f in FILES:
        (where / f).write_text("old\n")
    return where


def state(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_file_real_codex_changes_is_one_guard_names(codex: str, tmp_path: Path) -> None:
    modules = Path(codex).parents[1]  # <prefix>/node_modules/.bin/codex: the npm launcher
    native = next(modules.glob("@openai/codex-linux-*/vendor/*/bin/codex"))
    tool = tmp_path / "apply_patch"
    tool.symlink_to(native)
    rnd = random.Random(40)
    named = applied = 0
    for k in range(150):
        body = generate(rnd)
        effects = parse_patch(body)
        unknown = any(e.target is None and e.kind is EffectKind.WRITE for e in effects)
        targets = {e.target for e in effects if e.target is not None}
        root = scratch(tmp_path / f"case{k}")
        before = state(root)
        proc = subprocess.run([str(tool), body], cwd=root, capture_output=True, text=True,
                              timeout=60, check=False, env={**os.environ, "HOME": str(tmp_path)})
        after = state(root)
        changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)}
        applied += bool(changed)
        if unknown:
            continue  # refused in plan mode (an unknown write), whatever Codex would do
        named += 1
        assert changed <= targets, (body, changed, targets, proc.stdout, proc.stderr)
    print(f"{named} patches guard names the files of; real Codex changed files with {applied}")
    assert named >= 20 and applied >= 20, (named, applied)
