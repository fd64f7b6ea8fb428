"""Which version of a host agent started a hook, where it can be told (fleet records).

The hook process descends from the host, usually through a shell. No host passes its
version to hooks, so guard looks at the
ancestors of the hook's process: the program each runs (``/proc/PID/exe``) and the
absolute paths on its command line (a ``node .../cli.js``); the nearest
``package.json`` above one of them that names a known host package gives the version,
and so does a native build's layout (:attr:`guard.hosts.Host.native_version`: Claude
Code's ``.../claude/versions/<version>``). Answers are
kept per process (pid and start time), so a long-lived host is looked up once. Anything
that cannot be read gives None: the version is informational and never decides.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading

from guard import hosts

#: npm package names of each host (the platform packages of native builds included)
PACKAGES: dict[str, tuple[str, ...]] = {h.name: h.packages for h in hosts.HOSTS if h.packages}
#: the path of each host's native build, its version in group 1
NATIVE: dict[str, re.Pattern[str]] = {
    h.name: re.compile(h.native_version) for h in hosts.HOSTS if h.native_version
}
DEPTH = 8  # ancestors looked at
_cache: dict[tuple[int, str], tuple[str, bool] | None] = {}
_lock = threading.Lock()


def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time) of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode("ascii", "replace")
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return int(rest[1]), rest[19]
    except (IndexError, ValueError):
        return None


def _candidates(pid: int) -> list[str]:
    out = []
    with contextlib.suppress(OSError):
        out.append(os.readlink(f"/proc/{pid}/exe"))
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read(8192).split(b"\0")
    except OSError:
        args = []
    out += [os.fsdecode(a) for a in args[:8] if a.startswith(b"/")]
    # npm's .bin entries are links into the package: look from where they point
    return list(dict.fromkeys(os.path.realpath(p) for p in out))


PLATFORM = re.compile(r"-(?:linux|darwin|win32|freebsd)-(?:x64|arm64|ia32|arm)(?:-[a-z]+)?$")


def _package_version(
    path: str, names: tuple[str, ...], native: re.Pattern[str] | None = None
) -> tuple[str, bool] | None:
    """(version, whether the package is the host's own rather than a platform build)."""
    m = native.search(path) if native is not None else None
    if m:
        return m.group(1), True
    d = os.path.dirname(path)
    for _ in range(8):
        try:
            with open(os.path.join(d, "package.json"), "rb") as f:
                doc = json.loads(f.read(1 << 20))
        except (OSError, ValueError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("name"), str):
            name = doc["name"]
            if any(name == n or name.startswith(n + "-") for n in names):
                version = doc.get("version")
                if not version:
                    return None
                # a native build's package may carry the host's name and a platform suffix
                # on its version (Codex: "@openai/codex" "0.171.0-linux-x64")
                text = str(version)
                exact = name in names and PLATFORM.search(text) is None
                return PLATFORM.sub("", text), exact
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return None


def _lookup(
    pid: int, start: str, names: tuple[str, ...], native: re.Pattern[str] | None
) -> tuple[str, bool] | None:
    key = (pid, start)
    with _lock:
        if key in _cache:
            return _cache[key]
    found: tuple[str, bool] | None = None
    for path in _candidates(pid):
        found = _package_version(path, names, native)
        if found is not None and found[1]:
            break
    with _lock:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = found
    return found


def version_of(host: str, pid: int) -> str | None:
    """The version of ``host`` among the ancestors of ``pid`` (itself included): the host's
    own package first (a native build's platform package only when there is none)."""
    names = PACKAGES.get(host)
    if names is None:
        return None
    fallback: str | None = None
    for _ in range(DEPTH):
        st = _stat(pid)
        if st is None:
            break
        found = _lookup(pid, st[1], names, NATIVE.get(host))
        if found is not None:
            if found[1]:
                return found[0]
            fallback = fallback or found[0]
        if st[0] <= 1:
            break
        pid = st[0]
    return fallback
