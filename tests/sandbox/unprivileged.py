"""Running a test's commands as an unprivileged user (uid 65534) on files it can reach.

The user-namespace path of the confinement helper is only taken when guard runs as
a user other than root, so the attacks of the walls run both ways. As root, the test
drops to uid/gid 65534 with ``setpriv`` (util-linux). When the interpreter lives
under a directory that user cannot traverse (``/root`` is 0700 where pyenv put
Python in CI), the command runs in a private mount namespace of its own whose
``/root`` is a world-readable tmpfs holding bind mounts of exactly the directories
the interpreter and the host CLIs need (``~/.pyenv``, ``~/.cache``), at the same
paths; nothing else of root's home is reachable, and nothing outside that namespace
changes.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from components import CI_RULE, in_ci

NOBODY = 65534
USERS = ("root", "nobody")
#: Where the private tmpfs of :func:`as_user` is mounted (in its own mount namespace).
SHIM = "/tmp/guard-tests-root-shim"


def _traversable(path: str) -> bool:
    """Whether every directory above ``path`` lets others search it (o+x)."""
    p = Path(path)
    for parent in [*p.parents][::-1]:
        try:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return True


def _shim_dirs() -> list[str]:
    """Directories under an untraversable home that the interpreter needs."""
    real = os.path.realpath(sys.executable)
    if _traversable(real):
        return []
    home = Path(os.path.expanduser("~root"))
    if not Path(real).is_relative_to(home):
        return []
    out = []
    for name in (".pyenv", ".cache"):
        if (home / name).is_dir():
            out.append(name)
    return out


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
    dirs = _shim_dirs() if user != "root" else []
    if not dirs:
        return [*drop, *argv]
    home = os.path.expanduser("~root")
    os.makedirs(SHIM, mode=0o755, exist_ok=True)  # one empty mount point, kept
    script = (
        f'set -e; R={SHIM}; mount -t tmpfs -o mode=755 shim "$R";'
        + "".join(f' mkdir "$R/{d}"; mount --bind "{home}/{d}" "$R/{d}";' for d in dirs)
        + f' mount --rbind "$R" "{home}"; exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "shim",
            *drop, *argv]  # fmt: skip


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
