"""The user's words for the model (a reject reason, a refine note, answers, an approval)
handed over on whichever channel the model's host reads next.

``guard plan exit`` and the cockpit queue their words in the session's inbox
(:meth:`~guard.planning.session.Session.deliver`); the first of these takes them, once:

=============  ================================================================
Claude Code    the refusal of a tool call (PreToolUse deny reason), a tool's
               result (PostToolUse additionalContext), the next prompt and a
               session start (UserPromptSubmit/SessionStart additionalContext),
               the ExitPlanMode answer
Codex CLI      the refusal of a tool call, a tool's result (PostToolUse), the next
               prompt, and ``Stop``: the turn goes on with the note as its prompt
Gemini CLI     BeforeTool refusal, AfterTool context, BeforeAgent/SessionStart
OpenCode       the plugin's refusal text, the text added to a tool's output
MCP clients    the planning tools' results (guard.planning.tools)
=============  ================================================================

Never raises: a note that cannot be read now waits for the next channel.
"""

from __future__ import annotations

# Lazy imports: the binding module (the deciding session of a call) loads only when a hook
# answer may carry notes.
from guard.effects import ToolCall
from guard.planning.session import Session

HEADING = "Messages from the user (guard):"


def notes_text(messages: list[str]) -> str:
    """The waiting messages as one block for the model ('' for none)."""
    return "\n".join([HEADING, *messages]) if messages else ""


def session_for(call: ToolCall) -> Session | None:
    """The session deciding for ``call`` (the one the gate asked), or None."""
    from guard.planning.binding import ruling

    found = ruling(call)
    if found is None or not found.session:
        return None
    return Session.load(found.session, found.worktree or call.cwd or ".")


def take_notes(call: ToolCall) -> str:
    """Take the messages waiting for the model in the session deciding for ``call``."""
    try:
        session = session_for(call)
        return notes_text(session.take_inbox()) if session is not None else ""
    except Exception:  # informational: the note waits for the next channel
        return ""


def take_notes_at(cwd: str, host_session: str | None = None) -> str:
    """:func:`take_notes` for an event that names no tool call (a prompt, a turn's end)."""
    return take_notes(ToolCall("host", "-", {}, cwd, session=host_session))


def with_notes(text: str | None, notes: str) -> str | None:
    """``text`` followed by ``notes`` (either may be missing)."""
    if not notes:
        return text
    return f"{text}\n\n{notes}" if text else notes
