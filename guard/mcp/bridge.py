"""The planning-tool bridge: guard's own MCP tools and the session's mode behind them.

The planning tools (``plan_enter``, ``plan_exit``, ``update_plan``,
``request_user_input``) are guard's: offered in ``tools/list`` according to
the session's mode (a server's tools of the same names are hidden), answered
by the planning runtime (:mod:`guard.planning.tools`), never forwarded. The
session's mode is re-read whenever its file changes (each write is an atomic
rename); a changed mode changes the offer, and the router tells the client.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

from guard.effects import GuardError
from guard.mcp import asking
from guard.planning.checklist import RequestUserInputArgs
from guard.planning.handshake import EnterRequest, ExitRequest, UserDecision
from guard.planning.session import Mode, Session
from guard.planning.tools import TOOL_DEFINITIONS, TOOL_NAMES, ToolResult, handle_tool_call

Json = dict[str, Any]

#: Planning tools offered in each mode.
OFFERED: dict[Mode, tuple[str, ...]] = {
    Mode.PLAN: ("plan_exit", "request_user_input"),
    Mode.BUILD: ("plan_enter", "update_plan"),
}

#: Puts a question (message, JSON schema) to the user from a worker thread; its answer.
Elicit = Callable[[str, Json], Json]


class PlanningBridge:
    """One proxy session's planning tools, over one planning :class:`Session`."""

    def __init__(
        self,
        session: Session,
        log: Callable[[str], None],
        on_mode_change: Callable[[Mode], None],
    ) -> None:
        self.session = session
        self.log = log
        self.on_mode_change = on_mode_change
        self.mode = session.mode
        self._offered = session.mode
        self._stamp: tuple[int, int, int] | None = None
        self._path = session.path  # fixed for the session's life; stat()ed on every call
        self._lock = threading.Lock()

    @staticmethod
    def owns(tool: str) -> bool:
        return tool in TOOL_NAMES

    def sync(self) -> Mode:
        """Re-read the session when its file changed; tell ``on_mode_change`` about a new mode.

        Raises GuardError when the session file cannot be read.
        """
        try:
            st = os.stat(self._path)
        except OSError as exc:
            raise GuardError(f"session file {self._path} unreadable: {exc}") from None
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        # while a planning call runs in its worker thread, that thread owns the session
        # object; the mode is then the cached one, and it is synced when the call returns
        if stamp != self._stamp and self._lock.acquire(blocking=False):
            try:
                self.session.refresh()
                self._stamp = stamp
                self.mode = self.session.mode
            finally:
                self._lock.release()
        if self.mode is not self._offered:
            self._offered = self.mode
            self.on_mode_change(self.mode)
        return self.mode

    async def watch(self, interval: float = 1.0) -> None:
        """Notice mode changes made elsewhere (e.g. `guard plan exit --approve`)."""
        while True:
            await asyncio.sleep(interval)
            try:
                self.sync()
            except Exception as exc:
                self.log(f"cannot read the session: {exc}")

    def tools(self) -> list[Json]:
        """The planning tools offered in the current mode, as ``tools/list`` entries."""
        offered = OFFERED[self.mode]
        tools = [dict(t) for t in TOOL_DEFINITIONS if t["name"] in offered]
        plan_path = self.session.plan_path
        for tool in tools:
            if tool["name"] == "plan_exit" and plan_path:
                tool["description"] = f"{tool['description']} Your plan file: {plan_path}"
        return tools

    def patch_tools_list(self, result: Json) -> None:
        """Hide the server's tools named like ours; add ours to the last page."""
        tools = result.get("tools")
        if not isinstance(tools, list):
            return
        kept = []
        for tool in tools:
            if isinstance(tool, dict) and self.owns(tool.get("name", "")):
                self.log(f"the server's own tool {tool['name']!r} is hidden: guard answers it")
                continue
            kept.append(tool)
        if not result.get("nextCursor"):
            try:
                self.sync()
            except GuardError as exc:
                self.log(str(exc))
            kept.extend(self.tools())
        result["tools"] = kept

    async def call(self, name: str, arguments: Json, elicit: Elicit | None) -> ToolResult:
        """Answer a planning tool call; ``elicit`` asks the user (None: the client cannot)."""

        def ask_enter(request: EnterRequest) -> bool:
            assert elicit is not None
            message, schema = asking.enter_question(request)
            return asking.read_enter_answer(elicit(message, schema))

        def ask_exit(request: ExitRequest) -> UserDecision:
            assert elicit is not None
            message, schema = asking.exit_question(request)
            return asking.read_exit_answer(elicit(message, schema))

        def ask_questions(args: RequestUserInputArgs) -> list[str]:
            assert elicit is not None
            message, schema = asking.input_question(args)
            return asking.read_input_answer(args, elicit(message, schema))

        can_ask = elicit is not None

        def run() -> ToolResult:
            with self._lock:
                return handle_tool_call(
                    self.session,
                    name,
                    arguments,
                    ask_enter=ask_enter if can_ask else None,
                    ask_exit=ask_exit if can_ask else None,
                    ask_questions=ask_questions if can_ask else None,
                )

        result = await asyncio.to_thread(run)
        self.log(f"{name}: {'refused' if result.is_error else 'done'}: {result.text:.200}")
        try:
            self.sync()
        except GuardError as exc:
            self.log(str(exc))
        return result
