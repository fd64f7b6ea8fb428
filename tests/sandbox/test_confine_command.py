"""`guard confine -- ARGV`: the confined form Codex's and Cursor's plan-mode refusals hand out.

ARGV runs as a plan-mode shell command the Claude Code hook rewrites runs (namespaces,
Landlock, seccomp, the egress proxy; the plan directory, a private TMPDIR and the
terminal writable), with its own exit status, and one audit record. Where a wall
cannot stack, guard says which and the policy's ``require`` decides. A host sandbox's
own read-only mount inside the plan directory (Codex's ``.git``) is recognised.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import Tree, guard_argv, needs_landlock

from guard.sandbox.helper_dirs import check_plan_directory, host_read_only_mount

pytestmark = needs_landlock


def confine(tree: Tree, *argv: str, env: dict[str, str] | None = None,
            switches: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run(guard_argv("confine", "--", *argv, switches=switches),
                          cwd=tree.worktree,
                          env={**os.environ, **(env or {})},  # HOME: the tests' own
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_write_to_src_is_refused_the_plan_is_written_the_status_is_argvs(
    tree: Tree, tmp_path: Path
) -> None:
    """Attack: the confined form of a command that writes src/ and the plan file."""
    before = tree.victim.read_bytes()
    proc = confine(tree, "bash", "-c",
                   f"echo owned > {tree.victim}; echo '# Plan' > {tree.plans}/c.md; exit 7")
    assert proc.returncode == 7, proc.stderr
    assert tree.victim.read_bytes() == before
    assert re_kernel(proc.stderr)
    assert (tree.plans / "c.md").read_text() == "# Plan\n"


def re_kernel(text: str) -> bool:
    return "Read-only file system" in text or "Permission denied" in text


def test_it_writes_one_audit_record(tree: Tree) -> None:
    from guard.audit.logfile import read

    proc = confine(tree, "true")
    assert proc.returncode == 0, proc.stderr
    data = Path(os.environ["XDG_DATA_HOME"])
    records = [r for log in sorted(data.rglob("audit/*.jsonl")) for r in read(log)
               if r.get("source") == "confine"]
    assert records and records[-1]["argv"] == ["true"], records
    assert records[-1]["decision"] == "allow_confined" and records[-1]["agent"] == "plan"


def test_with_stdout_and_stderr_closed_argv_runs_and_gets_none_of_guards_descriptors(
    tree: Tree,
) -> None:
    """``guard confine -- ARGV >&- 2>&-`` runs ARGV and exits with its status (it used to
    exit 1 silently). Attack: ARGV writes to the stdout and stderr its caller closed,
    hoping they are one of guard's own descriptors (the audit log among them): they hold
    /dev/null, and the audit log has none of ARGV's bytes."""
    from guard.audit.logfile import read

    script = (
        "import os, sys\n"
        "where = {fd: os.readlink(f'/proc/self/fd/{fd}') for fd in (1, 2)}\n"
        "open(os.path.join(sys.argv[1], 'fds.md'), 'w').write(repr(where))\n"
        "for fd in (1, 2):\n    os.write(fd, b'FOR' + b'GED\\n')\n"  # not in the argv
        "raise SystemExit(7)\n"
    )
    argv = guard_argv("confine", "--", sys.executable, "-c", script, str(tree.plans))
    proc = subprocess.run(["bash", "-c", shlex.join(argv) + " >&- 2>&-"], cwd=tree.worktree,
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 7, proc
    assert (tree.plans / "fds.md").read_text() == repr({1: "/dev/null", 2: "/dev/null"})
    data = Path(os.environ["XDG_DATA_HOME"])
    logs = sorted(data.rglob("audit/*.jsonl"))
    assert any(r.get("source") == "confine" for log in logs for r in read(log))
    assert not any(b"FORGED" in log.read_bytes() for log in logs)


def test_a_required_wall_that_cannot_stack_refuses_to_run(tree: Tree, tmp_path: Path) -> None:
    """Inside another sandbox namespaces may be refused: with ``require`` guard says which
    wall is missing and does not run ARGV (exit 126); without it, it says the fallback."""
    marker = tree.plans / "ran.md"
    no_ns = ("no-namespaces",)  # through the test-only entry point (see tests/switched.py)
    weaker = confine(tree, "bash", "-c", f"echo x > {marker}", switches=no_ns)
    assert weaker.returncode == 0 and marker.exists(), weaker.stderr
    assert "Landlock-only fallback" in weaker.stderr
    marker.unlink()
    required = tmp_path / "require.toml"
    required.write_text('version = 1\nextends = ["builtin:default"]\n'
                        '[agents.plan.sandbox]\nrequire = ["network"]\n')
    proc = confine(tree, "bash", "-c", f"echo x > {marker}",
                   env={"GUARD_POLICY": str(required)}, switches=no_ns)
    assert proc.returncode == 126, proc.stderr
    assert "network" in proc.stderr and "NOT started" in proc.stderr
    assert not marker.exists()


def test_usage_errors_are_one_line(tree: Tree) -> None:
    proc = subprocess.run([sys.executable, "-m", "guard", "confine", "--"], cwd=tree.worktree,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    help_text = subprocess.run([sys.executable, "-m", "guard", "confine", "--help"],
                               capture_output=True, text=True, timeout=60, check=False).stdout
    assert "confined form" in help_text


@pytest.mark.parametrize("args", [["confine", "--"], ["confine"]])
@pytest.mark.parametrize("closed", ["", "2>&-", "<&- >&- 2>&-"])
def test_a_refusal_before_the_streams_are_held_exits_2_whatever_the_streams(
    tree: Tree, args: list[str], closed: str
) -> None:
    """``guard confine --`` with no command is refused before the standard streams are
    held: it exits 2 with stderr open (the message there) and with stderr closed (it used
    to exit 1 silently: the message's write failed on the missing stream)."""
    line = " ".join([*map(shlex.quote, guard_argv(*args)), closed])
    proc = subprocess.run(["bash", "-c", line], cwd=tree.worktree, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    if "2>&-" not in closed:
        assert "guard: error: no command given" in proc.stderr, proc.stderr
    else:
        assert proc.stderr == ""


def test_a_plain_directory_in_the_plan_directory_is_still_refused(tree: Tree) -> None:
    """Only a read-only mount point is the host sandbox's; a directory the agent made is not."""
    (tree.plans / "sub").mkdir()
    assert not host_read_only_mount(str(tree.plans / "sub"))
    with pytest.raises(OSError, match="is a directory"):
        check_plan_directory(str(tree.plans))


def test_a_read_only_mount_point_in_the_plan_directory_is_recognised(tree: Tree) -> None:
    """As Codex mounts ``.git`` read-only inside a writable root: a private mount namespace
    (unshare as root, or a user namespace) makes one, and the check lets it be."""
    target = tree.plans / ".git"
    target.mkdir()
    script = (
        f"mount --bind {tree.worktree / 'src'} {target} && mount -o remount,bind,ro {target}"
        f" && {sys.executable} -c 'import sys; from guard.sandbox.helper_dirs import"
        " check_plan_directory, host_read_only_mount; p = sys.argv[1];"
        " print(host_read_only_mount(p + \"/.git\")); check_plan_directory(p)'"
        f" {tree.plans}"
    )
    proc = subprocess.run(["unshare", "-rm", "bash", "-c", script], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"


@pytest.mark.parametrize("switches", [(), ("no-namespaces",)], ids=["namespaces", "fallback"])
def test_tools_that_keep_permissions_work_in_the_private_tmpdir(
    tree: Tree, switches: tuple[str, ...]
) -> None:
    """``cp -p``, ``cp -a`` and ``install -m`` set a mode the way coreutils does, through
    the ACL xattr first: guard refuses xattrs as a file system without them does
    (EOPNOTSUPP), so they fall back to chmod in the private TMPDIR and succeed, while
    the xattr itself is still refused and nothing outside changes."""
    before = tree.victim.stat().st_mode
    script = (
        'cd "$TMPDIR" && echo hi > a && chmod 750 a'
        " && cp -p a b && cp -a a c && install -m 711 a d"
        " && stat -c '%n %a' a b c d"
        " && python3 -c \"import os\ntry: os.setxattr('a', 'user.x', b'1')\n"
        "except OSError as e: print('xattr', os.strerror(e.errno))\""
        f" && (cp -p a {tree.victim} 2>/dev/null || echo victim refused)"
    )
    proc = confine(tree, "bash", "-c", script, switches=switches)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "a 750", "b 750", "c 750", "d 711", "xattr Operation not supported", "victim refused"
    ], (proc.stdout, proc.stderr)
    assert tree.victim.stat().st_mode == before
    assert tree.victim.read_text() != "hi\n"
