"""The one interface every host adapter implements.

A host adapter knows two things about its host and nothing else:

* the hook protocol: how a pending tool call arrives on stdin and becomes a
  :class:`~guard.effects.ToolCall` (:meth:`HostAdapter.parse`), and how a
  :class:`~guard.gate.Verdict` must look for the host to honour it
  (:meth:`HostAdapter.answer`);
* the hook configuration: which settings file holds hooks and what our entry
  in it looks like (:meth:`HostAdapter.settings_path`, :meth:`HostAdapter.add_entry`,
  :meth:`HostAdapter.remove_entries`, :meth:`HostAdapter.find_entries`).

Everything between (choosing the agent, computing effects, deciding, the audit
record) is the gate's (:mod:`guard.gate`); :mod:`guard.hooks.front_door`
connects the two.

An ``allow_confined`` verdict (run the call confined instead) needs a host that
can rewrite a tool call: Claude Code (``updatedInput``) and Gemini CLI
(``hookSpecificOutput.tool_input``) can; the others answer it as a deny whose
reason says why (:func:`cannot_confine`), unless the call already runs confined as
given (the confined form ``guard confine -- …``: :func:`runs_as_given`), which they
allow.

This module must stay cheap to import: the hook runs on every tool call.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from guard.effects import GuardError, ToolCall
from guard.gate import ModeHint

if TYPE_CHECKING:
    from guard.gate import ModeHint, Verdict
    from guard.hosts.interface import Host

#: Where a hook is wired: the worktree's shared settings file (``project``), a file in the
#: worktree that only this user has (``local``: the host's own untracked file, else the
#: project file kept out of git by ``guard install``), or the user-wide file (``user``).
Scope = Literal["project", "local", "user"]

#: How an entry written by ``guard install`` is recognised again: the hook
#: command runs guard's hook client, ``-m guard.hooks`` or ``guard hook``.
#: Both folder names count: guard/integrations/ is the pre-rename path of the hook
#: client (now guard/hooks/), still named by installs made before the rename, so
#: ``guard doctor`` reports such an entry as stale and ``guard install`` replaces it.
OUR_COMMAND = re.compile(
    r"(?:guard/(?:integrations|hooks)/_client\.py"
    r"|-m\s+guard\.(?:integrations|hooks)(?:\.__main__)?\b"
    r"|\bguard\s+hook\b|-m\s+guard\.planning\.host\b)"
)

#: Exit status every host treats as "block this call".
BLOCK_EXIT = 2


class HookInputError(GuardError):
    """The payload on stdin is not what the host's documented format says."""


@dataclass(frozen=True, slots=True)
class HookCall:
    """A pending tool call as a host announced it: the call, and the hook's own fields."""

    host: str
    event: str
    call: ToolCall
    tool_use_id: str | None = None
    permission_mode: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The hook's part of the audit record (the call's part is the verdict's)."""
        out: dict[str, Any] = {"host": self.host, "event": self.event}
        for key in ("tool_use_id", "permission_mode"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        for key, value in self.extra.items():  # host-specific fields, e.g. agent_id
            out.setdefault(key, value)
        return out


@dataclass(frozen=True, slots=True)
class HookAnswer:
    """What the hook process prints and how it exits."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""

    @classmethod
    def block(cls, reason: str) -> HookAnswer:
        """Exit 2 with the reason on stderr: every supported host treats it as a block."""
        return cls(BLOCK_EXIT, "", reason.rstrip("\n") + "\n")

    @classmethod
    def json(cls, payload: Mapping[str, Any]) -> HookAnswer:
        return cls(0, json.dumps(payload, ensure_ascii=False) + "\n", "")


def _str_or_none(payload: Mapping[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise HookInputError(f"field {key!r} must be a string, got {type(value).__name__}")
    return value


def require_str(payload: Mapping[str, Any], key: str) -> str:
    value = _str_or_none(payload, key)
    if value is None or value == "":
        raise HookInputError(f"field {key!r} is missing")
    return value


def optional_str(payload: Mapping[str, Any], key: str) -> str | None:
    return _str_or_none(payload, key)


def require_object(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise HookInputError(
            f"field {key!r} must be a JSON object, got"
            f" {'nothing' if value is None else type(value).__name__}"
        )
    return value


class HostAdapter(ABC):
    """One host agent's hook protocol and hook configuration."""

    #: The name used on the command line: ``guard hook NAME``, ``guard install NAME``.
    name: str
    #: Human name, for messages.
    title: str
    #: The tool dialect of the calls it announces (see ``guard.analysis.DIALECTS``).
    dialect: str
    #: The host version whose documented format this adapter follows.
    follows: str
    #: Whether the host honours an ``ask`` answer; if not, ask is answered as deny.
    honours_ask: bool = True
    #: Whether the host runs a tool input rewritten by the hook; if not,
    #: allow_confined is answered as deny.
    can_rewrite: bool = False
    #: The host's post-tool event guard wires (None: the host has none guard can use),
    #: where a tool that ran without guard's decision is caught (guard.hooks.missed).
    post_event: str | None = None
    #: Whether the payload's ``permission_mode`` (its ``plan``) picks guard's plan agent.
    reads_permission_mode: bool = False

    def __init_subclass__(cls, host: Host | None = None, follows: str = "", **kw: Any) -> None:
        """``class X(HostAdapter, host=HOST, follows=WHAT)``: :attr:`name`, :attr:`title`,
        :attr:`dialect` and :attr:`follows` (``WHAT`` of that version) from the host's record."""
        super().__init_subclass__(**kw)
        if host is not None:
            cls.name, cls.title, cls.dialect = host.name, host.title, host.dialect
            cls.follows = host.follows(follows)

    # -- the hook protocol -------------------------------------------------

    @abstractmethod
    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        """Read the host's stdin payload. Raises HookInputError."""

    def tool_event(
        self, payload: Mapping[str, Any], event: str, extra: tuple[str, ...] = ()
    ) -> HookCall:
        """The common pre-tool payload shape (Claude Code, Codex, Gemini CLI).

        ``hook_event_name`` must be ``event`` when present; ``extra`` names
        host-specific fields kept for the audit record.
        """
        given = optional_str(payload, "hook_event_name") or event
        if given != event:
            raise HookInputError(f"hook_event_name is {given!r}; guard answers only {event} hooks")
        call = ToolCall(
            dialect=self.dialect,
            name=require_str(payload, "tool_name"),
            input=require_object(payload, "tool_input"),
            cwd=optional_str(payload, "cwd"),
            session=optional_str(payload, "session_id"),
        )
        return HookCall(
            host=self.name,
            event=event,
            call=call,
            tool_use_id=optional_str(payload, "tool_use_id"),
            permission_mode=optional_str(payload, "permission_mode"),
            extra={k: payload[k] for k in extra if k in payload},
        )

    def parse_post(self, payload: Mapping[str, Any]) -> HookCall:
        """Read a post-tool payload (the tool already ran). Raises HookInputError."""
        if self.post_event is None:
            raise HookInputError(f"{self.title} has no post-tool event guard answers")
        return self.tool_event(payload, self.post_event)

    def post_answer(self, message: str | None) -> HookAnswer:
        """The answer to a post-tool call: nothing, or ``message`` for the model and the user."""
        if message is None:
            return HookAnswer(0)
        return HookAnswer.json({
            "systemMessage": message,
            "hookSpecificOutput": {"hookEventName": self.post_event,
                                   "additionalContext": message},
        })

    def permission_mode_hint(self, hook: HookCall) -> ModeHint | None:
        """Hosts with a ``permission_mode``: its ``plan`` means guard's plan agent."""
        if hook.permission_mode is None:
            return None
        mode = "plan" if hook.permission_mode == "plan" else "build"
        return ModeHint(mode, f"{self.title} permission_mode {hook.permission_mode!r}")

    def mode_hint(self, hook: HookCall) -> ModeHint | None:
        """The guard mode ("plan" or "build") the host's own state suggests, if any (with
        :attr:`reads_permission_mode`, its ``permission_mode``)."""
        return self.permission_mode_hint(hook) if self.reads_permission_mode else None

    def answered(self, verdict: Verdict, hook: HookCall | None = None) -> str:
        """What the host is told: ask and allow_confined become deny where not honoured."""
        action = verdict.action.value
        if action == "ask" and not self.honours_ask:
            return "deny"
        if action == "allow_confined" and not self.can_rewrite:
            return "allow" if runs_as_given(verdict) else "deny"
        return action

    def reason(self, verdict: Verdict, hook: HookCall | None = None) -> str:
        """The reason shown to the agent, saying why when the host is told less than guard."""
        text = f"guard: {verdict.reason} [{verdict.rule}]"
        action, told = verdict.action.value, self.answered(verdict, hook)
        if action == told or told == "allow":
            return text
        if action == "allow_confined":
            return text + cannot_confine(self.title)
        return text + (
            f" (guard's policy asks here; {self.title} hooks cannot ask, so guard denies)"
        )

    @abstractmethod
    def answer(self, verdict: Verdict, hook: HookCall) -> HookAnswer:
        """The host's answer for a verdict."""

    # -- the hook configuration --------------------------------------------

    @abstractmethod
    def settings_path(self, scope: Scope, project: Path, home: Path) -> Path:
        """The settings file that holds hooks for this scope (``local``: see
        :attr:`local_file`)."""

    #: Whether the host reads a per-user file inside the worktree beside the shared one
    #: (Claude Code's ``settings.local.json``); without one, ``local`` is the shared
    #: file kept out of git, or the user-wide file when the shared one is tracked.
    local_file: bool = False

    @abstractmethod
    def add_entry(self, settings: dict[str, Any], command: str) -> None:
        """Add our hook entry to parsed settings (our old entries already removed)."""

    @abstractmethod
    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        """The commands of our entries present in parsed settings."""

    @abstractmethod
    def remove_entries(self, settings: dict[str, Any]) -> int:
        """Remove our entries (and only ours) from parsed settings; how many were removed."""

    def failing_open(self, settings: Mapping[str, Any]) -> list[str]:
        """The events where one of our entries lacks the host's "block on failure" setting
        (the host then runs the call when the hook times out or cannot start): none for a
        host that has no such setting (its rule is in docs/hosts.md)."""
        return []


def cannot_confine(title: str) -> str:
    """Why an allow_confined verdict is a deny on a host that cannot rewrite a call."""
    return (
        f" (guard would run this command confined, but {title} hooks cannot rewrite a"
        f" tool call: run it as `guard confine -- bash -c '…'`, or {title} under"
        f" `guard run`, to have it run confined)"
    )


def runs_as_given(verdict: Verdict) -> bool:
    """An allow_confined verdict whose call already runs confined as given (the confined
    form ``guard confine -- …``): nothing to rewrite, so every host may allow it."""
    call = verdict.call
    return (
        verdict.action.value == "allow_confined"
        and call is not None
        and verdict.updated_input is not None
        and dict(verdict.updated_input) == dict(call.input)
    )


def rewritten_input(hook: HookCall, verdict: Verdict) -> dict[str, Any]:
    """The whole tool input a rewriting host must run for an allow_confined verdict."""
    if verdict.updated_input is None:
        raise ValueError("an allow_confined verdict without the input to run instead")
    return {**hook.call.input, **verdict.updated_input}


# -- the hosts whose files nest event -> groups -> handlers ---------------------------


class NestedHooksAdapter(HostAdapter):
    """A host whose pre-tool payload has the common shape (:meth:`HostAdapter.tool_event`)
    and whose settings file nests event -> groups -> handlers: guard's entries are found
    under :attr:`event` and removed from each of :attr:`wired_events`."""

    #: The pre-tool event guard's policy hook answers.
    event: str
    #: Every event guard wires: the policy hook, and the planning side (guard.planning.host).
    wired_events: tuple[str, ...]
    #: The host's own payload fields kept for the audit record.
    extra_fields: tuple[str, ...] = ()

    def parse(self, payload: Mapping[str, Any]) -> HookCall:
        return self.tool_event(payload, self.event, self.extra_fields)

    def find_entries(self, settings: Mapping[str, Any]) -> list[str]:
        return find_nested(settings, (self.event,))

    def remove_entries(self, settings: dict[str, Any]) -> int:
        return remove_nested(settings, self.wired_events)


def nested_groups(settings: Mapping[str, Any], event: str, where: str) -> list[Any]:
    """``settings["hooks"][event]`` as a list, or [] if absent. Raises ValueError if malformed."""
    hooks = settings.get("hooks")
    if hooks is None:
        return []
    if not isinstance(hooks, Mapping):
        raise ValueError(f"{where}: 'hooks' must be an object, found {type(hooks).__name__}")
    groups = hooks.get(event)
    if groups is None:
        return []
    if not isinstance(groups, list):
        raise ValueError(f"{where}: 'hooks.{event}' must be a list, found {type(groups).__name__}")
    return groups


def is_ours(handler: Any) -> bool:
    return (
        isinstance(handler, Mapping)
        and isinstance(handler.get("command"), str)
        and OUR_COMMAND.search(handler["command"]) is not None
    )


def find_nested(settings: Mapping[str, Any], events: tuple[str, ...]) -> list[str]:
    found: list[str] = []
    for event in events:
        for group in nested_groups(settings, event, "settings"):
            if isinstance(group, Mapping) and isinstance(group.get("hooks"), list):
                found.extend(h["command"] for h in group["hooks"] if is_ours(h))
    return found


def remove_nested(settings: dict[str, Any], events: tuple[str, ...]) -> int:
    """Drop our handlers; drop a group or an event only if we emptied it."""
    removed = 0
    hooks = settings.get("hooks")
    for event in events:
        groups = nested_groups(settings, event, "settings")
        if not groups:
            continue
        kept_groups: list[Any] = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = group["hooks"]
                kept = [h for h in handlers if not is_ours(h)]
                removed += len(handlers) - len(kept)
                if kept or not handlers:  # drop a group only if we emptied it
                    group["hooks"] = kept
                    kept_groups.append(group)
            else:
                kept_groups.append(group)
        assert isinstance(hooks, dict)
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if isinstance(hooks, dict) and not hooks and removed:
        del settings["hooks"]
    return removed


def add_nested(settings: dict[str, Any], event: str, group: dict[str, Any]) -> None:
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"'hooks' must be an object, found {type(hooks).__name__}")
    groups = nested_groups(settings, event, "settings")
    hooks[event] = [*groups, group]


def add_groups(
    settings: dict[str, Any],
    events: tuple[tuple[str, str | None], ...],
    handler: Mapping[str, Any],
) -> None:
    """One group running ``handler`` per (event, matcher) of ``events`` (no matcher: none)."""
    for event, matcher in events:
        group: dict[str, Any] = {"hooks": [dict(handler)]}
        if matcher is not None:
            group = {"matcher": matcher, **group}
        add_nested(settings, event, group)
