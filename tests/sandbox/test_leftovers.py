"""Nothing a confined command leaves is left: its private TMPDIR goes whatever it holds.

The command builds a tree deeper than any recursion limit (1000 levels, some of them
mode 0, with symlinks to a directory of the user's along the way) in its TMPDIR;
afterwards the TMPDIR is gone and what the links pointed at is intact. Through
``guard run`` (a new directory per run, on disk), as root and as uid 65534, and
through the helper without namespaces (the fallback: a fresh directory it makes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_support import helper_argv, needs_landlock
from unprivileged import USERS, require_unprivileged
from walls_support import Project, confined, py, run_project

from guard.sandbox import helper_dirs

pytestmark = needs_landlock

DEEP = """
import os, sys
keep = sys.argv[1] if len(sys.argv) > 1 else {keep!r}
tmp = os.environ["TMPDIR"]
fd = os.open(tmp, os.O_RDONLY)
for i in range({depth}):
    os.mkdir("d", dir_fd=fd)
    nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
    if i % 250 == 0:  # a directory its owner may no longer enter
        os.chmod(f"/proc/self/fd/{{fd}}", 0)
    os.close(fd)
    fd = nxt
    with open(f"/proc/self/fd/{{fd}}/f", "w") as f:
        f.write("x")
    if i % 100 == 0:
        os.symlink(keep, "link", dir_fd=fd)
print(tmp)
"""


@pytest.fixture(params=USERS)
def proj(request: pytest.FixtureRequest) -> Iterator[Project]:
    if request.param != "root":
        require_unprivileged()
    yield from run_project(str(request.param))


def test_remove_tree_has_no_depth_limit_and_follows_no_link(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    fd = os.open(doomed, os.O_RDONLY)
    for i in range(1000):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
        if i % 100 == 0:
            os.symlink(keep, "link", dir_fd=fd)
            os.mkdir("side", dir_fd=fd)
        if i % 300 == 0:
            os.chmod(f"/proc/self/fd/{fd}", 0)
    os.close(fd)
    assert helper_dirs.remove_tree(str(doomed))
    assert not doomed.exists()
    assert (keep / "precious").read_text() == "x"


def test_attack_a_tree_too_deep_to_remove_is_removed_after_guard_run(proj: Project) -> None:
    keep = proj.base / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    os.chown(keep, proj.uid, proj.uid)
    proc = confined(proj, "run", py(DEEP.format(keep=str(keep), depth=1000)))
    assert proc.returncode == 0, proc.stderr
    tmp = proc.stdout.split()[-1]
    assert tmp.startswith("/tmp/guard-run-plan-"), tmp
    assert not os.path.lexists(tmp)
    assert (keep / "precious").read_text() == "x"


def test_attack_a_tree_too_deep_to_remove_is_removed_in_the_fallback(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("x")
    plans = tmp_path / "plans"
    plans.mkdir()
    source = DEEP.format(keep=str(keep), depth=1000)
    proc = subprocess.run(
        helper_argv([], [sys.executable, "-c", source], "--plans", str(plans), "--private-tmp",
                    "--walls"),
        capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    tmp = proc.stdout.split()[-1]
    assert Path(tmp).parent == tmp_path.resolve() and "guard-confined-" in tmp, tmp
    assert not os.path.lexists(tmp), proc.stderr
    assert (keep / "precious").read_text() == "x"
