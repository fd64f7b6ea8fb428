"""One shell command, confined: what a host runs instead of the command (``allow_confined``).

Every test runs the wrapped text through a real bash, the way a host's shell
tool does, under the real kernel; the disk is checked afterwards.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sandbox_support import Tree, needs_landlock

from guard.sandbox import confine, helper_args

pytestmark = needs_landlock

# A stand-in for the shell that writes its one argument back, byte for byte.
ECHO_ARG = (
    sys.executable,
    "-c",
    "import os, sys; sys.stdout.buffer.write(os.fsencode(sys.argv[1]))",
)


def wrapped(tree: Tree, command: str, **kw: object) -> str:
    return confine.wrap_command(
        command,
        plans=[str(tree.plans)],
        cwd=str(tree.worktree),
        **kw,  # type: ignore[arg-type]
    )


def sh(text: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["bash", "-c", text],
        cwd=cwd,
        capture_output=True,
        timeout=60,
        **kw,  # type: ignore[call-overload]
    )


COMMANDS = st.lists(
    st.one_of(
        st.sampled_from([*"'\"`$\\!*?[]{}()<>|&;#~ \t\n\r%^=-@", "'\\''", "$(", "\\\n"]),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    ),
    max_size=60,
).map("".join)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(command=COMMANDS)
def test_the_wrapped_command_receives_exactly_the_original_text(tree: Tree, command: str) -> None:
    """Quotes, newlines, $, backslashes, non-ASCII: the inner shell gets the text unchanged,
    whether the host runs the wrapped text directly or through eval."""
    text = wrapped(tree, command, shell=ECHO_ARG)
    direct = sh(text, tree.worktree)
    assert direct.returncode == 0, direct.stderr
    assert direct.stdout == os.fsencode(command)
    via_eval = subprocess.run(
        ["bash", "-c", 'eval "$1"', "host", text], cwd=tree.worktree, capture_output=True,
        timeout=60,
    )  # fmt: skip
    assert via_eval.stdout == os.fsencode(command)


def test_a_nul_character_is_refused_before_anything_runs(tree: Tree) -> None:
    with pytest.raises(ValueError, match="NUL"):
        wrapped(tree, "echo a\0b")


def test_reads_behave_like_the_original(tree: Tree) -> None:
    """Exit status, stdout and stderr apart, cwd, the environment: the command's own."""
    cmd = 'echo out; echo err >&2; pwd; echo "$GREETING"; cat src/app.py; exit 7'
    env = {**os.environ, "GREETING": "hello there"}
    bare = sh(cmd, tree.worktree / "src", env=env)
    confined = sh(wrapped(tree, cmd), tree.worktree / "src", env=env)
    assert (confined.returncode, confined.stdout, confined.stderr) == (
        bare.returncode,
        bare.stdout,
        bare.stderr,
    )
    assert confined.returncode == 7


def test_git_log_status_and_cat_work_confined(tree: Tree) -> None:
    git = ["git", "-C", str(tree.worktree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "src"], check=True)
    subprocess.run([*git, "commit", "-qm", "first commit"], check=True)
    r = sh(wrapped(tree, "git log --oneline && git status --short && cat src/app.py"),
           tree.worktree)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert b"first commit" in r.stdout and b"print('original')" in r.stdout


def test_attack_writes_outside_the_plan_directory_fail_and_the_plan_file_is_written(
    tree: Tree,
) -> None:
    cmd = (
        "python3 -c \"open('src/x','w').write('x')\"; echo py=$?;"
        " sed -i 's/original/EVIL/' src/app.py; echo sed=$?;"
        " echo evil > /tmp/guard-confine-escape-$$; echo tmp=$?;"
        " echo '# plan' > .openoxide/plans/p.md; echo plan=$?;"
        ' echo scratch > "$TMPDIR/s" && cat "$TMPDIR/s"'
    )
    r = sh(wrapped(tree, cmd), tree.worktree)
    out = r.stdout.decode()
    assert "py=1" in out and "sed=4" in out and "tmp=1" in out and "plan=0" in out, out
    assert "scratch" in out
    assert tree.victim.read_text() == "print('original')\n"
    assert not (tree.worktree / "src" / "x").exists()
    assert not list(Path("/tmp").glob("guard-confine-escape-*"))
    assert (tree.plans / "p.md").read_text() == "# plan\n"


def test_the_private_tmpdir_is_kept_apart_and_refused_when_planted(
    tree: Tree, tmp_path: Path
) -> None:
    """A symlink planted where the private TMPDIR goes would make its target writable:
    the helper refuses to start (exit 126), and the command does not run."""
    planted = tmp_path / "tmproot"
    planted.mkdir(mode=0o700)
    target = tmp_path / "victim-dir"
    target.mkdir()
    (planted / "t").symlink_to(target)
    r = sh(wrapped(tree, "echo ran > ran.txt", tmpdir=str(planted / "t")), tree.plans)
    assert r.returncode == helper_args.NOT_STARTED
    assert b"NOT started" in r.stderr and b"symlink" in r.stderr
    assert not (tree.plans / "ran.txt").exists()
    ok = sh(wrapped(tree, 'echo "$TMPDIR"', tmpdir=str(planted / "own")), tree.worktree)
    assert ok.stdout.decode().strip() == str(planted / "own")
    assert (planted / "own").stat().st_mode & 0o777 == 0o700


def test_a_terminal_stays_a_terminal(tree: Tree) -> None:
    master, slave = os.openpty()

    def controlling_tty() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    cmd = "test -t 0 && test -t 1 && echo tty-ok > /dev/tty && stty size >/dev/null && echo done"
    proc = subprocess.Popen(
        ["bash", "-c", wrapped(tree, cmd)], stdin=slave, stdout=slave, stderr=slave,
        cwd=tree.worktree, start_new_session=True, preexec_fn=controlling_tty,
    )  # fmt: skip
    os.close(slave)
    output = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, output
    assert b"tty-ok" in output and b"done" in output


def test_confinement_is_available_here() -> None:
    assert confine.available() == ""


def test_a_missing_plan_directory_is_created_so_the_plan_can_be_written(tmp_path: Path) -> None:
    """`mkdir -p .openoxide/plans && cat > .openoxide/plans/p.md` in a fresh repository: the
    helper creates the plan directory before the restriction, and only the plan file lands."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    plans = repo / ".openoxide" / "plans"
    text = confine.wrap_command(
        "mkdir -p .openoxide/plans && echo '# Plan' > .openoxide/plans/p.md; echo x > src/x",
        plans=[str(plans)],
        cwd=str(repo),
    )
    r = sh(text, repo)
    assert (plans / "p.md").read_text() == "# Plan\n", r.stderr
    assert not (repo / "src" / "x").exists()


def test_attack_plan_directory_under_a_planted_link_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """Attack: the repository ships `.openoxide -> src`, so creating the plan directory would
    create `src/plans` and make src/ writable. The helper refuses and starts nothing."""
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / ".openoxide").symlink_to(repo / "src")
    marker = tmp_path / "ran"
    text = confine.wrap_command(
        f"touch {marker}", plans=[str(repo / ".openoxide" / "plans")], cwd=str(repo)
    )
    r = sh(text, repo)
    assert r.returncode != 0
    assert b"real directories only" in r.stderr
    assert not (repo / "src" / "plans").exists()
    assert not marker.exists()


def test_the_private_tmpdir_of_the_fallback_is_removed_when_a_signal_kills_the_command(
    tree: Tree,
) -> None:
    """Without namespaces the private TMPDIR is a directory on disk: it is removed before
    the helper dies of the signal that killed the command (as the command would have)."""
    text = confine.wrap_command(
        'echo "$TMPDIR"; touch "$TMPDIR/left"; kill -TERM $$', plans=[str(tree.plans)],
        cwd=str(tree.worktree), isolate=False,
    )  # fmt: skip
    r = sh(text, tree.worktree)
    assert r.returncode == -15 or r.returncode == 143, r.stderr
    tmp = r.stdout.decode().strip()
    assert tmp.startswith(("/tmp/", os.environ.get("TMPDIR") or "/tmp")), tmp
    assert not os.path.lexists(tmp)
