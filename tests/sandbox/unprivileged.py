"""Running a test's commands as an unprivileged user (uid 65534) on files it can reach.

The user-namespace path of the confinement helper is only taken when guard runs as
a user other than root, so the attacks of the walls run both ways. As root, the test
drops to uid/gid 65534 with ``setpriv`` (util-linux), through :func:`nobody.reach`
when the interpreter or the checkout lies under a directory that user cannot search.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from components import CI_RULE, in_ci
from nobody import reach

NOBODY = 65534
USERS = ("root", "nobody")


def require_unprivileged() -> None:
    """Skip (locally) or fail (CI) unless this test can run commands as uid 65534."""
    why = ""
    if os.geteuid() != 0:
        why = "the tests drop to uid 65534 from root; this run is not root"
    elif shutil.which("setpriv") is None or shutil.which("unshare") is None:
        why = "setpriv and unshare (util-linux) are needed to drop to uid 65534"
    if why:
        if in_ci():
            pytest.fail(f"{why} ({CI_RULE})", pytrace=False)
        pytest.skip(why)


LIMIT = str(Path(__file__).with_name("userns_limit.py"))


def as_user(user: str, argv: Sequence[str], *, no_user_namespaces: bool = False) -> list[str]:
    """``argv`` to run as ``user`` ("root": as it is; "nobody": uid/gid 65534).

    ``no_user_namespaces``: inside a user namespace where no further one may be made
    (``userns_limit.py``): a machine without unprivileged user namespaces, for real."""
    if user == "root" and not no_user_namespaces:
        return list(argv)
    drop: list[str] = []
    if no_user_namespaces:
        drop = [sys.executable, LIMIT]
    if user != "root":
        drop += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    shim = reach() if user != "root" else []
    return [*shim, *drop, *argv]


def reachable_dir(prefix: str, user: str) -> Path:
    """A new directory in /tmp that ``user`` owns and every user can traverse (pytest's own
    temporary directories are 0700 root's)."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    path.chmod(0o755)
    if user != "root":
        os.chown(path, NOBODY, NOBODY)
    return Path(os.path.realpath(path))


def chown_tree(root: Path, user: str) -> None:
    if user == "root":
        return
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            os.lchown(os.path.join(dirpath, name), NOBODY, NOBODY)
    os.lchown(root, NOBODY, NOBODY)
