"""The answer a planning session gives the gate for one call: :class:`ModeFound`.

It holds that one record and imports nothing, so the gate (imported by the hook on
every call) can name it cheaply. How a session is found is not here
(:func:`guard.planning.binding.ruling`), nor how the gate uses the answer
(:func:`guard.gate.resolve`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ModeFound:
    """The guard mode a session gives a call, and why (:func:`guard.planning.binding.ruling`).

    ``worktree``: the deciding session's worktree when its policy and plan directory
    apply whatever the call's cwd (a plan session of an enclosing worktree, or the one
    the agent run is bound to); ``session``: its id (the refusal names its plan file);
    ``note``: a sentence every refusal carries (e.g. the session's owner is gone).
    """

    mode: str
    why: str
    worktree: str | None = None
    session: str | None = None
    note: str = ""
