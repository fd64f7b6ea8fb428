"""The plan artifact: a durable markdown file in ``{plans}``.

Its name is ``<UTC YYYYMMDDTHHMMSSZ>-<session id>-<slug>.md``, fixed when the
session enters plan mode. A model may write its plan to another ``*.md`` file
directly in the plan directory instead: :func:`find_written_plan` finds it, and
the session adopts it at the exit, so the handshake never dead-ends on a name.
Writes are atomic and refuse any target that is not a ``*.md`` file directly
inside the session's plan directory.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from guard.effects import GuardError
from guard.paths import plan_dir
from guard.planning._store import atomic_write_text, read_nofollow


class PlanHolder(Protocol):
    """What the artifact functions need of a session (a ``Session``)."""

    @property
    def id(self) -> str: ...

    @property
    def plans_dir(self) -> str: ...

    @property
    def plan_path(self) -> str | None: ...

SLUG_MAX = 48
ARTIFACT_RE = re.compile(
    r"^(?P<ts>\d{8}T\d{6}Z)-(?P<session>[A-Za-z0-9][A-Za-z0-9_-]*)-(?P<slug>[\w-]+)\.md$"
)


#: a plan file's name: letters and digits of any script, then also ``._ -``; never a
#: separator, a control or format character (bidi overrides, zero-width joiners)
PLAN_NAME_RE = re.compile(r"^[^\W_][\w. -]*\.md$")


class ArtifactError(GuardError):
    """A plan artifact that cannot be written or read safely."""


def slugify(title: str | None) -> str:
    """Letters and digits of any script (NFKC, lower case), hyphen-separated, at most 48
    characters, never empty or path-like: anything else (punctuation, separators, marks,
    controls, bidi and zero-width characters) becomes one hyphen."""
    text = unicodedata.normalize("NFKC", title or "")
    text = unicodedata.normalize("NFKC", text.lower())
    slug = re.sub(r"[\W_]+", "-", text).strip("-")
    slug = slug[:SLUG_MAX].rstrip("-")
    return slug or "plan"


def artifact_name(session_id: str, title: str | None, when: datetime | None = None) -> str:
    stamp = (when or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{session_id}-{slugify(title)}.md"


def artifact_path(session: PlanHolder, title: str | None, when: datetime | None = None) -> Path:
    """The path a session's plan artifact gets when it enters plan mode."""
    return Path(session.plans_dir) / artifact_name(session.id, title, when)


def _checked_target(session: PlanHolder) -> Path:
    if not session.plan_path:
        raise ArtifactError(
            f"session {session.id} has no plan artifact yet: enter plan mode first"
            f" (`guard mode plan --session {session.id}`)"
        )
    target = Path(session.plan_path)
    plans = Path(session.plans_dir)
    if target.parent != plans or not PLAN_NAME_RE.match(target.name):
        raise ArtifactError(
            f"refusing plan artifact path {target}: it must be a markdown file (*.md)"
            f" directly inside {plans}"
        )
    return target


def write_plan(session: PlanHolder, text: str) -> Path:
    """Write the plan document atomically to the session's fixed artifact path."""
    target = _checked_target(session)
    plans = target.parent
    plans.mkdir(parents=True, exist_ok=True)
    real_parent = Path(os.path.realpath(plans))
    if real_parent != Path(os.path.realpath(session.plans_dir)) or real_parent != plans:
        raise ArtifactError(
            f"refusing to write the plan: {plans} resolves to {real_parent} through a symlink;"
            " remove the link so plans stay inside the plan directory"
        )
    if os.path.isdir(target):
        raise ArtifactError(f"refusing to write the plan: {target} is a directory; remove it")
    atomic_write_text(target, text if text.endswith("\n") or not text else text + "\n")
    return target


def read_plan(session: PlanHolder) -> str | None:
    """The plan document, or None when the artifact does not exist yet. Never follows a link."""
    if not session.plan_path:
        return None
    try:
        return read_nofollow(Path(session.plan_path))
    except OSError as exc:
        raise _unreadable(session, exc) from None


def plan_digest(data: bytes) -> str:
    """The digest an approval binds to: SHA-256 (hex) of the plan file's exact bytes."""
    return hashlib.sha256(data).hexdigest()


def count_lines(data: bytes) -> int:
    """Lines of a plan as an editor counts them (a last line without a newline counts)."""
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def plan_text(data: bytes) -> str:
    """How the plan's bytes are shown: UTF-8 (undecodable bytes as U+FFFD), line ends kept, so
    a carriage return is seen (and made visible) rather than folded away."""
    return data.decode("utf-8", errors="replace")


def read_plan_bytes(session: PlanHolder) -> bytes | None:
    """The plan file's exact bytes (None when it does not exist yet). Never follows a link."""
    if not session.plan_path:
        return None
    try:
        fd = os.open(
            session.plan_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _unreadable(session, exc) from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ArtifactError(
                f"the plan file {session.plan_path} is not a regular file; remove it and write"
                " the plan there"
            )
        return handle.read()


def _unreadable(session: PlanHolder, exc: OSError) -> ArtifactError:
    if exc.errno == errno.ELOOP:
        return ArtifactError(
            f"the plan file {session.plan_path} is a symlink; plan files must be regular"
            " files (remove the link and write the plan there)"
        )
    return ArtifactError(f"cannot read the plan file {session.plan_path}: {exc.strerror}")


@dataclass(frozen=True, slots=True)
class Artifact:
    path: Path
    session: str | None
    created: str
    size: int

    def to_json(self) -> dict[str, str | int | None]:
        return {
            "path": str(self.path),
            "session": self.session,
            "created": self.created,
            "size": self.size,
        }


def list_plans(
    cwd: str | os.PathLike[str], owners: Mapping[str, str] | None = None
) -> list[Artifact]:
    """Plan artifacts in the plan directory of ``cwd``, oldest first.

    ``owners`` maps a plan path to the id of the session that owns it (ids and
    slugs may both hold hyphens, so the file name alone is ambiguous);
    :func:`guard.planning.runtime.list_plans` fills it from the sessions.
    """
    directory = plan_dir(cwd).path
    if not directory.is_dir():
        return []
    owners = owners or {}
    out: list[Artifact] = []
    for entry in directory.iterdir():
        if not PLAN_NAME_RE.match(entry.name) or entry.is_symlink() or not entry.is_file():
            continue
        match = ARTIFACT_RE.match(entry.name)
        st = entry.stat()
        if match:
            ts = match["ts"]
            created = f"{ts[0:4]}-{ts[4:6]}-{ts[6:8]}T{ts[9:11]}:{ts[11:13]}:{ts[13:15]}Z"
        else:
            when = datetime.fromtimestamp(st.st_mtime, UTC)
            created = when.strftime("%Y-%m-%dT%H:%M:%SZ")
        out.append(Artifact(entry, owners.get(str(entry)), created, st.st_size))
    out.sort(key=lambda a: (a.created, a.path.name))
    return out


def _signature(st: os.stat_result) -> list[int]:
    return [st.st_ino, st.st_size, st.st_mtime_ns]


def snapshot_plans(plans_dir: str | os.PathLike[str]) -> dict[str, list[int]]:
    """The ``*.md`` files in ``plans_dir`` now (name -> inode, size, mtime), to compare later."""
    directory = Path(plans_dir)
    out: dict[str, list[int]] = {}
    try:  # never fails a plan start: an unreadable directory is an empty snapshot
        entries = list(directory.iterdir()) if directory.is_dir() else []
    except OSError:
        return out
    for entry in entries:
        if PLAN_NAME_RE.match(entry.name):
            with contextlib.suppress(OSError):
                out[entry.name] = _signature(entry.lstat())
    return out


def find_written_plan(
    plans_dir: str | os.PathLike[str], seen: dict[str, list[int]], exclude: set[str]
) -> tuple[Path | None, list[Path]]:
    """The plan file a model wrote in ``plans_dir`` since ``seen`` was taken, if exactly one.

    Candidates are non-empty regular ``*.md`` files directly in the directory
    (never links), new or changed since the snapshot ``seen`` (see
    :func:`snapshot_plans`) and not in ``exclude`` (other sessions' plan
    files). Returns (the one candidate or None, all candidates).
    """
    directory = Path(plans_dir)
    if not directory.is_dir():
        return None, []
    found: list[Path] = []
    for entry in sorted(directory.iterdir()):
        if not PLAN_NAME_RE.match(entry.name) or str(entry) in exclude:
            continue
        try:
            st = entry.lstat()
        except OSError:
            continue
        changed = seen.get(entry.name) != _signature(st)
        if stat.S_ISREG(st.st_mode) and st.st_size > 0 and changed:
            found.append(entry)
    return (found[0] if len(found) == 1 else None), found
