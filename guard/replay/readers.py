"""The transcript readers of ``guard replay``: one per host of :mod:`guard.hosts` that has a
``transcript`` part (``guard/hosts/<host>/transcript.py``, each behind
:class:`guard.replay.model.Reader`), and guard's own audit log:

- guard's audit log (``<data>/audit/<project>.jsonl``): the connections the egress
  proxy decided (``dialect: "egress"`` records with their input under ``egress``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from guard import hosts
from guard.replay.model import Reader, ReplayCall, json_lines, need, text_or_none


class GuardAudit:
    """guard's own audit log: the connections its egress proxy decided. They are the
    records that keep their call's input (under ``egress``); every other record is
    skipped (a hook's record leaves the tool input out: it may hold secrets)."""

    host = "audit"

    def sniff(self, path: Path, first: Mapping[str, Any]) -> bool:
        return "ts" in first and "source" in first and first.get("type") in (
            "verdict", "violation", "notice")

    def read(self, path: Path) -> Iterator[ReplayCall]:
        for n, rec in json_lines(path):
            data = rec.get("egress")
            if rec.get("type") != "verdict" or rec.get("dialect") != "egress" or \
                    not isinstance(data, dict):
                continue
            name = rec.get("tool_name")
            need(isinstance(name, str) and bool(name), path, n,
                 "an egress record without a 'tool_name' string")
            yield ReplayCall(
                self.host, "egress", str(name), data, text_or_none(rec.get("cwd")),
                text_or_none(rec.get("session_id")), text_or_none(rec.get("ts")), str(path), n,
            )


#: Per host of :mod:`guard.hosts` with a reader (in the registry's order), then guard's audit log.
READERS: dict[str, Reader] = {
    **{h.name: h.reader() for h in hosts.HOSTS if h.replayable},
    GuardAudit.host: GuardAudit(),
}
HOSTS: tuple[str, ...] = tuple(READERS)
