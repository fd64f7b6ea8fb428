"""What the evaluator (:mod:`guard.decide`) keeps around its rule walk: the memos' bound,
and the fast way to build the decisions of the per-path hot path.

Nothing here decides anything: the walk and its wording live in :mod:`guard.decide`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from guard.effects import Action, Decision, Effect, GuardError

#: how many decisions one memo (a plain dict: its look-up is the hot path) keeps before
#: it starts again empty
MEMO_LIMIT = 1 << 16


def decision_maker() -> Callable[[Action, str, str, Effect | None], Decision]:
    """``Decision(action, reason, rule, effect)`` for the per-path hot path: the frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``; its slot
    descriptors set them directly, a third of the time. Only while Decision has exactly
    these four slotted fields; otherwise the class itself."""
    names = ("action", "reason", "rule", "effect")
    slots = getattr(Decision, "__slots__", ())
    if tuple(f.name for f in dataclasses.fields(Decision)) != names or tuple(slots) != names:
        return Decision
    new = object.__new__
    set_action, set_reason, set_rule, set_effect = (vars(Decision)[n].__set__ for n in names)

    def make(action: Action, reason: str, rule: str, effect: Effect | None) -> Decision:
        d: Decision = new(Decision)
        set_action(d, action)
        set_reason(d, reason)
        set_rule(d, rule)
        set_effect(d, effect)
        return d

    return make


new_decision = decision_maker()


def with_effect(d: Decision, effect: Effect) -> Decision:
    """``d`` (a memoized decision) for another, equal-keyed effect."""
    return Decision(d.action, d.reason, d.rule, effect)


def with_reason(d: Decision, reason: str) -> Decision:
    return Decision(d.action, reason, d.rule, d.effect)


def error_decision(exc: BaseException, effect: Effect | None = None) -> Decision:
    """The deny for an error while deciding: guard never fails open."""
    what = f" for {effect}" if effect is not None else ""
    msg = str(exc) or type(exc).__name__
    if not isinstance(exc, GuardError):
        msg = f"{type(exc).__name__}: {msg}"
    return Decision(
        Action.DENY, f"error while deciding{what}: {msg} (fail closed)", "guard.error", effect
    )
