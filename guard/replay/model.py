"""The records replay passes around, and the one error a bad transcript raises."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from guard.effects import GuardError


class TranscriptError(GuardError):
    """A transcript guard cannot read: the message starts with ``FILE:LINE:``."""


@dataclass(frozen=True, slots=True)
class ReplayCall:
    """One tool call found in a transcript, as the host recorded it."""

    host: str
    dialect: str
    tool: str
    input: Mapping[str, Any]
    cwd: str | None
    session: str | None
    time: str | None
    file: str
    line: int
    sidechain: bool = False
    call_id: str | None = None

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(slots=True)
class ReplayResult:
    """A replayed call and the gate's verdict on it."""

    index: int
    call: ReplayCall
    decision: str
    reason: str
    rule: str
    effects: list[dict[str, Any]] = field(default_factory=list)
    resolved: str | None = None

    @property
    def blocked(self) -> bool:
        return self.decision in ("deny", "ask")

    def to_json(self) -> dict[str, Any]:
        c = self.call
        out: dict[str, Any] = {
            "index": self.index, "time": c.time, "host": c.host, "session": c.session,
            "cwd": c.cwd, "tool": c.tool, "input": dict(c.input), "effects": self.effects,
            "decision": self.decision, "reason": self.reason, "rule": self.rule,
            "sidechain": c.sidechain, "source": c.source,
        }  # fmt: skip
        if c.call_id is not None:
            out["call_id"] = c.call_id
        if self.resolved is not None:
            out["resolved"] = self.resolved
        return out


class Reader(Protocol):
    """One host's transcript format."""

    #: The host's name (``--host``), also the dialect its calls are decided in.
    host: str

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        """Whether a file whose first JSON record is ``first`` is this host's."""
        ...

    def read(self, path: Path) -> Iterator[ReplayCall]:
        """The tool calls of ``path``, in order, one line at a time."""
        ...


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL file; located errors."""
    try:
        f = path.open(encoding="utf-8")
    except OSError as exc:
        raise TranscriptError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    with f:
        n = 0
        try:
            for n, text in enumerate(f, 1):
                if not text.strip():
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as exc:
                    what = (
                        "truncated: the last line ends in the middle of a record"
                        if not text.endswith("\n")
                        else f"not JSON: {exc.msg} at column {exc.colno}"
                    )
                    raise TranscriptError(f"{path}:{n}: {what}") from None
                if not isinstance(obj, dict):
                    raise TranscriptError(
                        f"{path}:{n}: expected a JSON object, got {type(obj).__name__}"
                    )
                yield n, obj
        except UnicodeDecodeError:
            raise TranscriptError(f"{path}:{n + 1}: not UTF-8 text") from None


def load_document(path: Path) -> tuple[str, Any]:
    """(text, parsed) of a one-document JSON file; located errors, truncation named."""
    try:
        text = path.read_text(encoding="utf-8")
        return text, json.loads(text)
    except json.JSONDecodeError as exc:
        what = ("truncated: the document ends early" if not exc.doc.rstrip().endswith(("}", "]"))
                else f"not JSON: {exc.msg}")
        raise TranscriptError(f"{path}:{exc.lineno}: {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TranscriptError(f"{path}: cannot read it: {exc}") from None


def first_record(path: Path) -> dict[str, Any] | None:
    """The first JSON object of a file (None when it has none); located errors."""
    for _, obj in json_lines(path):
        return obj
    return None


def need(cond: bool, path: Path, line: int, what: str) -> None:
    if not cond:
        raise TranscriptError(f"{path}:{line}: {what}")


def need_object(value: Any, path: Path, line: int, what: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else a :class:`TranscriptError` naming ``what``."""
    need(isinstance(value, dict), path, line, f"{what} must be a JSON object")
    assert isinstance(value, dict)
    return value


def text_or_none(value: Any) -> str | None:
    """``value`` when it is a string, else None."""
    return value if isinstance(value, str) else None
