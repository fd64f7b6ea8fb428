"""Replay past agent sessions through the gate: what would the policy have blocked?

One reader per host transcript format (:mod:`guard.replay.readers`), each yielding
:class:`ReplayCall` records line by line; :func:`guard.replay.engine.replay` decides
every call through :class:`guard.gate.Gate` (no audit log, no session state);
:mod:`guard.replay.output` renders the table, JSON, SARIF and HTML. See docs/replay.md.
"""

from __future__ import annotations

from guard.replay.model import ReplayCall, ReplayResult, TranscriptError

__all__ = ["ReplayCall", "ReplayResult", "TranscriptError"]
