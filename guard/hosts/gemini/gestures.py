"""Gemini CLI's planning gestures: its own ``exit_plan_mode`` (guard.planning.host)::

    BeforeTool  exit_plan_mode       -> Gemini's own exit (``{plan_filename}``, a file in
                                        ``$GEMINI_PLANS_DIR``): its text becomes the plan
                                        file when the model wrote none, the exit is recorded
                                        as pending, and the call is refused: Gemini's hooks
                                        cannot ask, and headless Gemini approves its own exit
                                        with nobody asked, so the user approves with
                                        `guard plan exit --approve`

A context event with nothing to say is answered ``{}`` (Gemini reads JSON on stdout).
"""

from __future__ import annotations

# Lazy imports: stat only when a plan file is read.
import os
from collections.abc import Mapping
from typing import Any

from guard.hosts.gemini import HOST
from guard.planning.handover import (
    Answer,
    Gesture,
    Gestures,
    context_answer,
    json_answer,
    request_exit,
    waits,
)
from guard.planning.notes import notes_text, with_notes
from guard.planning.runtime import plan_file_instruction

EXIT_TOOL = "exit_plan_mode"


class GeminiGestures(Gestures):
    def context(self, event: str, text: str) -> Answer:
        if not text:
            return json_answer({})
        return context_answer(event, text)

    def gesture(self, call: Gesture) -> Answer:
        if call.event == "BeforeTool" and call.tool == EXIT_TOOL:
            return gemini_exit(call.cwd, call.tool_input, call.env)
        return json_answer({})


#: Gemini's plan files are small markdown; more than this is not a plan.
MAX_PLAN_BYTES = 1 << 20


def gemini_plan_text(filename: object, plans_dir: str | None) -> str | None:
    """The text of Gemini's plan ``filename`` in ``$GEMINI_PLANS_DIR``; None if unsafe or absent.

    Only a regular ``*.md`` file directly inside that directory, never through a link.
    """
    if not isinstance(filename, str) or not plans_dir or not filename.endswith(".md"):
        return None
    if "/" in filename or filename.startswith(".") or "\x00" in filename:
        return None
    try:  # O_NONBLOCK: opening a FIFO planted under that name must not wait for a writer
        fd = os.open(os.path.join(plans_dir, filename),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_PLAN_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_PLAN_BYTES:
        return None
    return data.decode("utf-8", errors="replace")


def gemini_exit(cwd: str, tool_input: Mapping[str, Any], env: Mapping[str, str]) -> Answer:
    """BeforeTool exit_plan_mode: keep the plan, record the request, refuse the exit.

    Gemini's hooks cannot ask, and headless Gemini approves its own exit with
    nobody asked, so the exit never counts as the user's approval here.
    """
    given = gemini_plan_text(tool_input.get("plan_filename"), env.get("GEMINI_PLANS_DIR"))
    session, plan_path = request_exit(cwd, given, f"{HOST.name} {EXIT_TOOL}")
    if session is None:
        return json_answer({})  # no guard plan session here: the policy hook decides alone
    if plan_path is None:
        reason = f"guard: there is no plan to approve yet. {plan_file_instruction(cwd, session)}"
    else:
        reason = waits(session, plan_path) + " End your turn."
    reason = with_notes(reason, notes_text(session.take_inbox())) or reason
    return json_answer({"decision": "deny", "reason": reason})


GESTURES = GeminiGestures()
