"""Making this checkout reachable to uid 65534, for the tests that attack guard as that user.

Run as root, the suite drops to uid 65534 (``setpriv``) and runs guard from this checkout:
its virtualenv's interpreter, the Python that interpreter links to, the package and the
host CLIs' caches. Where one of them lies under a directory that user cannot search (pyenv's
Python under a 0700 ``/root``, a checkout cloned into ``mktemp -d``'s 0700 directory), the
command runs in a private mount namespace of its own: each such directory is covered by a
world-searchable tmpfs holding bind mounts of exactly the entries on the way to what is
needed, at the same paths. Nothing else in those directories becomes visible, and nothing
outside that namespace changes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

#: The checkout the tests run guard from.
CHECKOUT = Path(__file__).resolve().parent.parent
#: Where the private tmpfs is mounted (in its own mount namespace); one empty mount point.
SHIM = "/tmp/guard-tests-root-shim"


def unsearchable_dirs(path: Path) -> list[Path]:
    """The directories on the way to ``path`` (``path`` excluded) that other users cannot
    search (no o+x), outermost first."""
    out = []
    for directory in reversed(path.parents):
        try:
            if not directory.stat().st_mode & 0o001:
                out.append(directory)
        except OSError:
            out.append(directory)
    return out


def needed() -> list[Path]:
    """What a command run as uid 65534 needs to reach: the interpreter (as named and
    resolved), this checkout and root's cache of host CLIs and npm packages."""
    paths = [Path(sys.executable), Path(os.path.realpath(sys.executable)), CHECKOUT]
    cache = Path(os.path.expanduser("~root")) / ".cache"
    if cache.is_dir():
        paths.append(cache)
    return paths


def covers(paths: Iterable[Path]) -> dict[Path, list[str]]:
    """Each unsearchable directory on the way to ``paths``, with the names in it that lead
    there: what the shim covers, and what it shows of each (outermost first)."""
    out: dict[Path, list[str]] = {}
    for path in paths:
        path = Path(os.path.abspath(path))
        for directory in unsearchable_dirs(path):
            name = path.relative_to(directory).parts[0]
            names = out.setdefault(directory, [])
            if name not in names:
                names.append(name)
    return dict(sorted(out.items(), key=lambda item: len(item[0].parts)))


def reach(paths: Iterable[Path] | None = None) -> list[str]:
    """The argv prefix (to go before ``setpriv``) that makes ``paths`` (default:
    :func:`needed`) reachable to uid 65534; empty when they already are."""
    cover = covers(needed() if paths is None else paths)
    if not cover:
        return []
    os.makedirs(SHIM, mode=0o755, exist_ok=True)
    script = [f'set -e; R={SHIM}; mount -t tmpfs -o mode=755 shim "$R"']
    for i, (directory, names) in enumerate(cover.items()):
        script.append(f'mkdir "$R/{i}"')
        for name in names:
            source = directory / name
            make = "mkdir" if source.is_dir() else "touch"
            script.append(f'{make} "$R/{i}/{name}"; mount --bind "{source}" "$R/{i}/{name}"')
    # outermost first: an inner directory is then found through the outer one's bind
    script += [f'mount --rbind "$R/{i}" "{d}"' for i, d in enumerate(cover)]
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            "; ".join(script) + '; exec "$@"', "reach"]  # fmt: skip
