"""Properties of the shell analyser, checked with hypothesis.

1. It never raises, whatever the string.
2. Every command it classifies as read-only (only read effects) leaves a scratch
   directory unchanged when bash really runs it there: contents, sizes, modes and
   mtimes of every file, directory and link are compared before and after.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from guard.analysis import ToolInputError, effects_for
from guard.analysis.shell import analyse
from guard.effects import EffectKind


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_analyse_never_raises_on_any_text(command: str) -> None:
    effects = analyse(command, None)
    assert isinstance(effects, list)
    _no_internal_error(command, effects)


def _no_internal_error(command: str, effects: list[Any]) -> None:
    """The catch-all turns analyser bugs into unknown writes (fail closed); none may occur."""
    bugs = [e.detail for e in effects if "analysis failed" in e.detail]
    assert not bugs, f"{command!r}: {bugs}"


_SHELLISH = st.lists(
    st.sampled_from(
        [
            "echo",
            "rm",
            "x",
            "'",
            '"',
            "$(",
            ")",
            "`",
            "|",
            ";",
            "&&",
            ">",
            ">>",
            "<<",
            "EOF",
            "\n",
            "{",
            "}",
            "(",
            "$",
            "*",
            "\\",
            "bash",
            "-c",
            "sed",
            "-i",
            "=",
            "[[",
            "]]",
            "((",
            "))",
            "cd",
            "..",
            "/",
            "~",
            "#",
            "&",
            "<(",
            ">(",
            "${",
            "!",
            "-",
            " ",
        ]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_SHELLISH)
def test_analyse_never_raises_on_shell_fragments(command: str) -> None:
    effects = analyse(command, "/")
    for e in effects:
        assert e.kind in EffectKind
    _no_internal_error(command, effects)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3)
    ),
    max_leaves=10,
)
_TOOLS = (
    [
        ("claude-code", t)
        for t in (
            "Read",
            "Write",
            "Edit",
            "MultiEdit",
            "NotebookEdit",
            "Glob",
            "Grep",
            "LS",
            "Bash",
            "WebFetch",
            "Task",
            "Agent",
        )
    ]
    + [("codex", t) for t in ("shell", "exec_command", "apply_patch")]
    + [("opencode", t) for t in ("read", "write", "edit", "patch", "bash", "glob", "task")]
    + [
        ("gemini", t)
        for t in (
            "read_file",
            "write_file",
            "replace",
            "run_shell_command",
            "read_many_files",
            "web_fetch",
        )
    ]
    + [
        ("mcp", t)
        for t in ("write_file", "edit_file", "move_file", "read_multiple_files", "search_files")
    ]
)
_FIELDS = [
    "file_path",
    "filePath",
    "path",
    "command",
    "cmd",
    "pattern",
    "notebook_path",
    "source",
    "destination",
    "paths",
    "edits",
    "url",
    "prompt",
    "patchText",
    "subagent_type",
    "workdir",
    "directory",
    "dryRun",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_TOOLS), st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=4))
def test_effects_for_raises_only_tool_input_errors(dt: tuple[str, str], data: Any) -> None:
    """Malformed input is a ToolInputError naming the field, never another exception."""
    dialect, tool = dt
    try:
        effects = effects_for(dialect, tool, data, "/")
    except ToolInputError as exc:
        assert str(exc).startswith(dialect)
        return
    assert effects and effects[0].kind is EffectKind.TOOL


# --------------------------------------------------------------------------- running them


def _which(*names: str) -> list[str]:
    return [n for n in names if shutil.which(n)]


_READERS = _which(
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "grep",
    "sort",
    "uniq",
    "cut",
    "nl",
    "od",
    "stat",
    "du",
    "file",
    "md5sum",
    "sha256sum",
    "base64",
    "rev",
    "tac",
    "xxd",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "echo",
    "printf",
    "tr",
    "find",
    "sed",
    "tree",
    "jq",
    "comm",
    "paste",
    "diff",
    "cmp",
    "fold",
    "rg",
)
_FILES = [
    "a.txt",
    "b.txt",
    "sub/c.md",
    "sub",
    ".",
    "missing.txt",
    "link",
    "out.txt",
    "sub/new.md",
    "/dev/null",
    "-",
    "*.txt",
    "sub/*",
]
_OPTIONS = [
    "-n",
    "-l",
    "-a",
    "-r",
    "-c",
    "-s",
    "-u",
    "-o",
    "-i",
    "-e",
    "-f",
    "-d",
    "-1",
    "--version",
    "-R",
    "-h",
    "-v",
    "-name",
    "-type",
    "-print",
    "-delete",
    "-exec",
    "-fprint",
    "-maxdepth",
    "1",
    "2",
    "-w",
    "-x",
    "-E",
    "-z",
    "--in-place",
    "--output=out.txt",
    "-p",
    "-t",
    "--",
    "f",
    "d",
    "x",
    "p",
    "s/a/b/",
    "s/a/b/w out.txt",
    "1d",
    "$p",
    "w out.txt",
    ".",
    "{}",
    ";",
    "+",
    "'1e touch z'",
    "-i.bak",
    "-ni",
    "-C",
    "-D",
    "-P",
    "-F",
    "-O",
    "-T",
    "-S",
    "-b",
    "-m",
    "-L",
    "-fls",
    "-newer",
    "-k2",
    "--files0-from=a.txt",
    "-r",
    "-o out.txt",
    "--",
    "-fprintf",
    "%p",
]
_GIT = [
    "status",
    "log",
    "log --oneline",
    "diff",
    "show",
    "branch",
    "branch -a",
    "blame a.txt",
    "rev-parse HEAD",
    "ls-files",
    "branch newbranch",
    "tag v1",
    "config --get user.name",
    "config user.name x",
    "stash list",
    "describe --always",
    "diff --output=out.txt",
]


@st.composite
def _simple(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return "git " + draw(st.sampled_from(_GIT))
    prog = draw(st.sampled_from(_READERS))
    words = draw(st.lists(st.sampled_from(_OPTIONS + _FILES), max_size=5))
    cmd = " ".join([prog, *words])
    redirect = draw(
        st.sampled_from(
            [
                "",
                "",
                "",
                " 2>/dev/null",
                " > out.txt",
                " >> a.txt",
                " < a.txt",
                " 2>&1",
                " &> /dev/null",
            ]
        )
    )
    return cmd + redirect


@st.composite
def _command(draw: st.DrawFn) -> str:
    parts = draw(st.lists(_simple(), min_size=1, max_size=3))
    seps = draw(
        st.lists(
            st.sampled_from([" | ", "; ", " && ", " || "]),
            min_size=len(parts) - 1,
            max_size=len(parts) - 1,
        )
    )
    out = parts[0]
    for sep, part in zip(seps, parts[1:], strict=True):
        out += sep + part
    wrap = draw(
        st.sampled_from(
            ["{}", "{}", 'echo "$({})"', "bash -c '{}'", "( {} )", "timeout 5 {}", "{} | head -5"]
        )
    )
    return wrap.replace("{}", out, 1) if "'" not in out or not wrap.startswith("bash") else out


def _populate(root: Path) -> None:
    env = _git_env(root)
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=env)
    (root / "a.txt").write_text("alpha\nbeta\na line\n")
    (root / "b.txt").write_text("beta\ngamma\n")
    (root / "sub").mkdir()
    (root / "sub" / "c.md").write_text("# c\n")
    (root / "data.json").write_text('{"a": 1}\n')
    os.symlink("a.txt", root / "link")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=root, check=True, env=env)
    # Let the index settle (entries written in the same second as the index are "racily
    # clean" and git rewrites the index to fix them), then refresh it once.
    time.sleep(1.1)
    subprocess.run(
        ["git", "status", "--porcelain"], cwd=root, check=True, env=env, stdout=subprocess.DEVNULL
    )


def _git_env(root: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t.invalid",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t.invalid",
        HOME=str(root.parent / "home"),
        GIT_CONFIG_NOSYSTEM="1",
        PAGER="cat",
        GIT_PAGER="cat",
        LC_ALL="C",
    )
    return env


def _snapshot(root: Path) -> dict[str, tuple[Any, ...]]:
    """Everything a write could change, for every entry below ``root`` (atime excluded)."""
    snap: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames, ""]:
            path = os.path.join(dirpath, name) if name else dirpath
            st_ = os.lstat(path)
            if stat.S_ISLNK(st_.st_mode):
                content: Any = os.readlink(path)
            elif stat.S_ISREG(st_.st_mode):
                content = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            else:
                content = None
            rel = os.path.relpath(path, root)
            if rel == ".git":
                # git status/diff take an optional lock: .git/index.lock is created and
                # removed, which touches this directory's times and nothing else (the
                # index itself and every other file are still compared).
                snap[rel] = (st_.st_mode,)
                continue
            snap[rel] = (
                st_.st_mode,
                st_.st_size,
                st_.st_mtime_ns,
                st_.st_ctime_ns,
                content,
            )
    return snap


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("scratch") / "work"
    root.mkdir()
    (root.parent / "home").mkdir()
    _populate(root)
    return root


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)
@given(_command())
def test_read_only_commands_leave_the_directory_unchanged(scratch: Path, command: str) -> None:
    """Attack: a command the analyser calls read-only that writes anyway (sort -o, uniq
    OUT, find -fprint, sed w, git branch NAME...). Run it for real and compare."""
    effects = analyse(command, str(scratch))
    _no_internal_error(command, effects)
    assume(all(e.kind is EffectKind.READ for e in effects))
    before = _snapshot(scratch)
    # a reader that follows its input (tail -f) is killed; the disk is still compared
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            ["bash", "-c", command],
            cwd=scratch,
            env=_git_env(scratch),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=20,
            check=False,
        )
    after = _snapshot(scratch)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"{command!r} was classified read-only but changed {changed}"


def test_the_grammar_reaches_both_classes(scratch: Path) -> None:
    """The property above is not vacuous: the grammar yields read-only and writing commands."""
    samples = [
        "sort -o out.txt a.txt",
        "uniq a.txt b2.txt",
        "cat a.txt | sort",
        "git branch newbranch",
        "git status",
        "git --no-optional-locks status",
        "find . -fprint out.txt",
        "sed -n p a.txt",
    ]
    ro = [c for c in samples if all(e.kind is EffectKind.READ for e in analyse(c, str(scratch)))]
    assert ro == ["cat a.txt | sort", "git --no-optional-locks status", "sed -n p a.txt"]
