"""Codex CLI's planning gestures: a ``<proposed_plan>`` in its final answer
(guard.planning.host)::

    Stop                             -> Codex's plan gesture is text: a final answer holding
                                        ``<proposed_plan>...</proposed_plan>``. Its text
                                        becomes the plan file when the model wrote none, the
                                        exit is recorded as pending, and the user is told
                                        (systemMessage) to approve with `guard plan exit
                                        --approve`; Codex hooks cannot ask. (``update_plan``
                                        is Codex's checklist, not an exit: guard refuses it
                                        in plan mode.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from guard.hosts.codex import HOST
from guard.planning.handover import Answer, Gesture, Gestures, json_answer, request_exit, waits
from guard.planning.notes import take_notes_at

PLAN_TAG = re.compile(r"<proposed_plan>\s*(.*?)\s*</proposed_plan>", re.DOTALL)
EXIT_HINT = (
    "end your turn with the plan inside <proposed_plan>...</proposed_plan> (guard keeps it"
    " as the plan file when you wrote none)"
)


class CodexGestures(Gestures):
    def exit_hint(self, env: Mapping[str, str]) -> str:
        return EXIT_HINT

    def gesture(self, call: Gesture) -> Answer:
        if call.event == "Stop":
            return codex_stop(call.cwd, call.payload.get("last_assistant_message"),
                              call.text("session_id"))
        return Answer(0)


def codex_stop(cwd: str, message: object, host_session: str | None = None) -> Answer:
    """Stop: a final answer with ``<proposed_plan>`` is Codex's plan hand-over. The user's
    words waiting for the model (a refine note, a reject reason) keep the turn going, as
    its next prompt."""
    notes = take_notes_at(cwd, host_session)
    if notes:
        return json_answer({"decision": "block", "reason": notes})
    found = PLAN_TAG.findall(message) if isinstance(message, str) else []
    if not found:
        return Answer(0)
    session, plan_path = request_exit(cwd, str(found[-1]), f"{HOST.name} <proposed_plan>")
    if session is None:
        return Answer(0)
    if plan_path is None:
        return json_answer({"systemMessage": "guard: the proposed plan is empty; plan mode holds."})
    return json_answer({"systemMessage": waits(session, plan_path)})


GESTURES = CodexGestures()
