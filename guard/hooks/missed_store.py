"""Where the hook keeps what it knows of a host session: ``<data>/missed``.

The directory (:func:`missed_dir`), the file key of a host session
(:func:`file_key`) and an atomic JSON write (:func:`write_json`), shared by the
holds and transcript offsets of :mod:`guard.hooks.missed` and the session
starts of :mod:`guard.hooks.reconcile`. What those files mean is not here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guard.paths import data_dir

SUBDIR = "missed"

_DIRS: dict[tuple[str | None, str | None], Path] = {}


def missed_dir() -> Path:
    """``<data>/missed``: holds, transcript offsets, session starts (plan mode cannot write
    guard's data directory). Remembered per $HOME and $XDG_DATA_HOME: asked several times
    per hook call."""
    key = (os.environ.get("HOME"), os.environ.get("XDG_DATA_HOME"))
    found = _DIRS.get(key)
    if found is None:
        found = _DIRS[key] = data_dir() / SUBDIR
    return found


def file_key(host: str, session: str | None, cwd: str | None) -> str:
    """The file key of a host session (of the cwd when the host names no session)."""
    if session:
        return _session_key(host, session)
    who = f"cwd:{os.path.realpath(cwd or '.')}"
    return hashlib.sha256(f"{host}\0{who}".encode("utf-8", "surrogateescape")).hexdigest()[:32]


@functools.lru_cache(maxsize=256)
def _session_key(host: str, session: str) -> str:
    return hashlib.sha256(f"{host}\0{session}".encode("utf-8", "surrogateescape")).hexdigest()[:32]


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` whole or not at all (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
