"""Docs that run: every shell command in README.md, SECURITY.md, docs/*.md and
examples/**/*.md, and every example in `--help`, is run in a scratch repository
with this install's `guard` on PATH; the exit code and the key output the text
claims are checked.

Expectation syntax (a trailing comment on the command line):

- ``# exit N`` anywhere in the comment: the exit status must be N (default 0);
- the words ``ALLOW``, ``DENY``, ``ASK`` in the comment: that decision is printed;
- in a ``console`` block, the lines after a ``$ command`` are its output: each one
  (spaces collapsed) must appear in what the command printed.

Markers, on the lines just before a fence (HTML comments, invisible when rendered):

- ``<!-- docs-test: skip (why) -->``: not run (needs a real host, a terminal, a
  network, or runs until interrupted); the reason is required;
- ``<!-- docs-test: setup COMMAND -->``: run COMMAND first in the block's shell.

Each block runs in one bash process (variables carry from line to line) in a
fresh repository; `--help` examples that need something the scratch repository
cannot have are listed in HELP_SKIPS with the reason.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted(
    {
        *[ROOT / "README.md", ROOT / "SECURITY.md"],
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "examples").rglob("*.md"),
    }
)
FENCE = re.compile(r"^```(sh|console|bash|shell)\s*$")
MARKER = re.compile(r"^<!--\s*docs-test:\s*(skip|setup)\s*(.*?)\s*-->\s*$")
DECISIONS = ("ALLOW", "DENY", "ASK")


@dataclass
class Command:
    text: str  # shell text, continuation lines joined
    exit_code: int = 0
    words: list[str] = field(default_factory=list)  # decisions the text claims
    output: list[str] = field(default_factory=list)  # console output lines claimed


@dataclass
class Block:
    where: str  # FILE:LINE
    commands: list[Command]
    setup: list[str]
    skip: str | None


def _comment(line: str) -> tuple[str, str]:
    """(command, trailing comment): the comment starts at a `#` after whitespace, outside quotes."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "#" and i > 0 and line[i - 1] in " \t":
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def _command(text: str, comment: str) -> Command:
    m = re.search(r"\bexit (\d+)", comment)
    words = [w for w in DECISIONS if re.search(rf"\b{w}\b", comment)]
    return Command(text, int(m.group(1)) if m else 0, words)


def parse_commands(lines: list[str], console: bool) -> list[Command]:
    out: list[Command] = []
    pending = ""
    for raw in lines:
        if console and not raw.startswith("$ ") and not pending:
            if out and raw.strip():
                out[-1].output.append(_comment(raw)[0] if "  #" in raw else raw.strip())
            continue
        line = raw[2:] if console and raw.startswith("$ ") and not pending else raw
        if not line.strip() or (line.lstrip().startswith("#") and not pending):
            continue
        line = line.lstrip() if pending else line
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        text, comment = _comment(pending + line)
        pending = ""
        out.append(_command(text, comment))
    return out


def parse_blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        setup: list[str] = []
        skip = None
        j = i - 1
        while j >= 0 and (mm := MARKER.match(lines[j])):
            if mm.group(1) == "skip":
                skip = mm.group(2) or "(no reason given)"
            else:
                setup.insert(0, mm.group(2))
            j -= 1
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        cmds = parse_commands(lines[i + 1 : end], m.group(1) == "console")
        where = f"{path.relative_to(ROOT)}:{i + 1}"
        blocks.append(Block(where, cmds, setup, skip))
        i = end + 1
    return blocks


ALL_BLOCKS = [b for p in DOCS for b in parse_blocks(p)]


def scratch_repo(base: Path) -> Path:
    """A git repository with a source file, the plan directory, examples/ and policies/."""
    repo = base / "project"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "app.py").write_text("print('hello')\n")
    (repo / ".openoxide" / "plans").mkdir(parents=True)
    shutil.copytree(ROOT / "examples", repo / "examples")
    shutil.copytree(ROOT / "policies", repo / "policies")
    git = ["git", "-C", str(repo), "-c", "user.name=docs", "-c", "user.email=docs@guard.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "scratch project"], check=True)
    return Path(os.path.realpath(repo))


def run_commands(
    commands: list[Command], setup: list[str], repo: Path, what: str, timeout: float = 300
) -> None:
    """Run ``commands`` in one bash process in ``repo``; check each one's claims."""
    logs = repo.parent / "logs"
    logs.mkdir(exist_ok=True)
    script = ["set +e", *setup]
    for n, c in enumerate(commands):
        script.append(
            f"{{ {c.text}\n}} >{logs}/{n}.out 2>{logs}/{n}.err </dev/null; echo $? >{logs}/{n}.rc"
        )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "120",
        "NO_COLOR": "1",
        "GIT_AUTHOR_NAME": "docs test",
        "GIT_AUTHOR_EMAIL": "docs@guard.invalid",
        "GIT_COMMITTER_NAME": "docs test",
        "GIT_COMMITTER_EMAIL": "docs@guard.invalid",
    }
    env.pop("GUARD_POLICY", None)
    env.pop("GUARD_AGENT", None)
    proc = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    for n, c in enumerate(commands):
        rc_file = logs / f"{n}.rc"
        assert rc_file.exists(), f"{what}: `{c.text}` did not run: {proc.stderr}"
        out = (logs / f"{n}.out").read_text(errors="replace")
        err = (logs / f"{n}.err").read_text(errors="replace")
        code = int(rc_file.read_text())
        shown = f"{what}: `{c.text}`\n--- stdout\n{out[-2000:]}\n--- stderr\n{err[-2000:]}"
        assert code == c.exit_code, f"exit {code}, the text says {c.exit_code}: {shown}"
        assert "Traceback" not in out + err, shown
        for w in c.words:
            assert re.search(rf"\b{w}\b", out), f"{w} claimed but not printed: {shown}"
        flat = " ".join(out.split())
        for line in c.output:
            assert " ".join(line.split()) in flat, f"output line {line!r} not printed: {shown}"


def test_the_parser_reads_the_expectation_syntax() -> None:
    cmds = parse_commands(
        [
            "guard check write src/a.py   # DENY, exit 1",
            "guard check --json read .env  # {\"decision\": \"ask\"}, exit 3",
            "guard run --agent plan -- aider \\",
            "    --chat-mode ask",
            "echo '# not a comment'",
        ],
        console=False,
    )
    assert [(c.text, c.exit_code, c.words) for c in cmds] == [
        ("guard check write src/a.py", 1, ["DENY"]),
        ("guard check --json read .env", 3, []),
        ("guard run --agent plan -- aider --chat-mode ask", 0, []),
        ("echo '# not a comment'", 0, []),
    ]
    (c,) = parse_commands(["$ guard effects x", "tool   bash  # claude-code Bash"], console=True)
    assert c.text == "guard effects x" and c.output == ["tool   bash"]


def test_every_doc_with_shell_blocks_is_found() -> None:
    files = {b.where.split(":")[0] for b in ALL_BLOCKS}
    assert {"README.md", "docs/planning.md", "examples/claude-code/README.md"} <= files
    for b in ALL_BLOCKS:
        assert b.skip is None or b.skip.strip("() "), f"{b.where}: a skip needs a reason"


@pytest.mark.parametrize(
    "block", [b for b in ALL_BLOCKS if b.skip is None], ids=lambda b: b.where
)
def test_doc_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    assert block.commands, f"{block.where}: an empty shell block"
    run_commands(block.commands, block.setup, scratch_repo(tmp_path), block.where)


# ---- --help examples ---------------------------------------------------------------------------

#: examples in --help that the scratch repository cannot run, and why
HELP_SKIPS: list[tuple[str, str]] = [
    (r"^guard watch\b", "runs until interrupted"),
    (r"^guard mcp\b", "needs an MCP client on stdin"),
    (r"--follow", "runs until interrupted"),
    (r"^guard run .*-- (aider|bash|myagent)\b", "needs that agent or a terminal"),
    (r"^guard install .*--user", "writes the user's home settings"),
    (r"\b(ID|<id>|SERVER_CMD|20261202\S*)\b|<id>", "a placeholder the reader fills in"),
    (r"^guard demo\b", "run by tests/test_cli_core.py"),
    (r"^guard ui\b", "a terminal app: tests/ui drives it headless"),
    (r"^guard plan answer\b", "needs a model's pending request_user_input question"),
    (r"^guard (replay|review)\b.*(~/|session\.jsonl)", "needs the reader's own transcripts"),
    (r"^guard audit verify --shipped /var/log/", "needs a collector's file (tests/fleet runs it)"),
]


def help_examples() -> list[tuple[str, Command]]:
    from typer.main import get_command

    from guard.cli import app

    found: list[tuple[str, Command]] = []

    def walk(cmd: object, path: list[str]) -> None:
        text = f"{getattr(cmd, 'help', '') or ''}\n{getattr(cmd, 'epilog', '') or ''}"
        # an example may go on over lines ending in a backslash, as in a shell
        text = re.sub(r"\\\n\s*", "", text)
        for raw in text.splitlines():
            s = raw.strip()
            s = s[len("Example: ") :] if s.startswith("Example: ") else s
            if re.match(r"^(guard |echo |SID=)", s) and not s.startswith("guard adds"):
                (c,) = parse_commands([s], console=False)
                found.append((" ".join(["guard", *path]), c))
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*path, name])

    walk(get_command(app), [])
    return found


HELP_EXAMPLES = help_examples()


def _help_skip(text: str) -> str | None:
    for rx, why in HELP_SKIPS:
        if re.search(rx, text):
            return why
    return None


def test_help_examples_are_found_and_skips_are_few() -> None:
    texts = [c.text for _, c in HELP_EXAMPLES]
    assert any(t.startswith("guard check --agent plan write src/main.py") for t in texts)
    skipped = [t for t in texts if _help_skip(t)]
    assert len(skipped) < len(texts) / 2, skipped


def _prepared(tmp_path: Path) -> Path:
    """The scratch repository with what help examples refer to: a planning session with a
    plan, a call file, host settings to import, a policy file."""
    repo = scratch_repo(tmp_path)
    (repo / "call.json").write_text('{"file_path": "src/x.py", "content": "x"}')
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(
        '{"permissions": {"allow": ["Read"], "deny": ["Bash(rm:*)"]}}'
    )
    (repo / "opencode.json").write_text('{"permission": {"edit": "ask", "bash": "allow"}}')
    (repo / ".openoxide" / "policy.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n'
    )
    return repo


@pytest.mark.parametrize(
    ("where", "command"),
    [(w, c) for w, c in HELP_EXAMPLES if not _help_skip(c.text)],
    ids=[c.text[:60] for w, c in HELP_EXAMPLES if not _help_skip(c.text)],
)
def test_help_example_runs_as_written(where: str, command: Command, tmp_path: Path) -> None:
    repo = _prepared(tmp_path)
    setup = []
    starts = re.match(r"^guard (plan|session) start\b", command.text)  # a fresh worktree
    if re.match(r"^guard (plan|session|mode|events)\b", command.text) and not starts:
        setup = [
            "guard session start --mode plan --title 'Add caching' >/dev/null",
            'echo "# Plan" > "$(guard plan path)"',
        ]
    if command.text.startswith("guard import"):
        setup = [
            "rm .openoxide/policy.toml",  # the examples write it
            "mkdir -p ~/.claude && cp .claude/settings.json ~/.claude/settings.json",
        ]
    run_commands([command], setup, repo, f"`{where} --help`: {shlex.quote(command.text)}")
