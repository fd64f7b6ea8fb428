"""The interface every host implements: one frozen :class:`Host` record and the parts of
its package.

A host is a package ``guard/hosts/<module>/`` (``<module>`` is its name with ``_`` for
``-``) whose ``__init__`` holds its :class:`Host` record as ``HOST``, and whose other
modules are its parts, each optional and imported only when asked for:

==================  =========================================================================
part                what it holds
==================  =========================================================================
``hook.py``         ``ADAPTER``: its hook adapter (:class:`guard.hooks.adapter.HostAdapter`)
``tool_table.py``   ``TOOLS``: the tool table of its own dialect (:mod:`guard.analysis`)
``importer.py``     ``convert(settings, agent)``: ``guard import``, its settings -> a policy
``transcript.py``   ``READER``: ``guard replay``, its transcripts
                    (:class:`guard.replay.model.Reader`)
``gestures.py``     ``GESTURES``: its planning gestures (:class:`guard.planning.handover.Gestures`)
``settings.py``     ``SETTINGS``: what ``guard install`` and ``guard doctor`` do beyond the common
                    settings file (:class:`guard.setup.host_settings.HostSettings`)
``red_team.py``     ``OPERATIONS``: ``guard review``'s red-team operations in its dialect
                    (:class:`guard.lint.operation.Operation`)
==================  =========================================================================

The record lists the parts its package has (:attr:`Host.parts`), so a host list
(the hosts with hooks, the importable ones) is read from the records without importing
any part: the hook's start-up path pays for the one host it serves. This module imports
nothing of guard, so no import cycle goes through it.

>>> from guard import hosts
>>> hosts.by_name("codex").package
'guard.hosts.codex'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from guard.record import Record
from guard.record import set_field as _set

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    from guard.analysis.dialect import Handler
    from guard.importers.common import Draft
    from guard.planning.handover import Gestures
    from guard.replay.model import Reader

#: The parts a host package may hold (see the module docstring).
PARTS = frozenset({
    "hook", "tool_table", "importer", "transcript", "gestures", "settings", "red_team",
})


class Planning(Record):
    """The planning gestures of a host: how guard's planning hook talks to it (frozen)."""

    __slots__ = ("context_events", "hook_events")
    __match_args__ = ("context_events", "hook_events")

    #: the hook events whose answer is context for the model
    context_events: tuple[str, ...]
    #: the (event, matcher) pairs ``guard install`` wires to the planning hook
    hook_events: tuple[tuple[str, str | None], ...]

    def __init__(
        self, context_events: tuple[str, ...], hook_events: tuple[tuple[str, str | None], ...]
    ) -> None:
        _set(self, "context_events", context_events)
        _set(self, "hook_events", hook_events)


class Checklist(Record):
    """The tool a host's model keeps its checklist with, and where the steps are in its
    input (frozen)."""

    __slots__ = ("key", "text_keys", "tool")
    __match_args__ = ("tool", "key", "text_keys")

    #: the tool's name in the host's dialect
    tool: str
    #: the key of the list of steps in the tool's input
    key: str
    #: the keys of a step's text, first found wins
    text_keys: tuple[str, ...]

    def __init__(self, tool: str, key: str, text_keys: tuple[str, ...]) -> None:
        _set(self, "tool", tool)
        _set(self, "key", key)
        _set(self, "text_keys", text_keys)


class Host(Record):
    """One host agent: what guard pins, protects and runs for it, and its parts (frozen)."""

    __slots__ = ("changing_tools", "checklist", "dialect", "environment", "hook_files",
                 "name", "native_version", "packages", "parts", "planning", "protected",
                 "reads_transcript", "title", "version")  # fmt: skip
    __match_args__ = ("name", "title", "version", "packages", "dialect", "protected",
                      "planning", "changing_tools", "checklist", "parts", "hook_files",
                      "native_version", "reads_transcript", "environment")  # fmt: skip

    #: the name on guard's command line (``guard install NAME``, the hook's argument)
    name: str
    #: the product's own name, for prose
    title: str
    #: the version guard follows and tests against (scripts/test.sh keeps its own copy)
    version: str
    #: npm packages of its CLI (native builds' platform packages included), first the main one
    packages: tuple[str, ...]
    #: the tool-call dialect of its calls (:data:`guard.analysis.DIALECTS`), '' without hooks;
    #: a dialect of the host's own (its ``tool_table`` part) is named after the host
    dialect: str
    #: its hook settings: denied for writes in every agent (``{home}`` patterns and
    #: project patterns, in :data:`guard.decide.PROTECTED_PATTERNS`' syntax)
    protected: tuple[str, ...]
    #: its planning gestures, None when guard's planning hook does not serve it
    planning: Planning | None
    #: tools whose result means something may have changed (a missed hook's evidence)
    changing_tools: frozenset[str]
    #: its checklist tool, shown in the plan's checklist lane
    checklist: Checklist | None
    #: the parts its package holds (:data:`PARTS`)
    parts: frozenset[str]
    #: the files (relative to a worktree and to the home directory) whose ``hooks`` guard
    #: review lists, with the commands that call guard
    hook_files: tuple[str, ...]
    #: where its native build lives (a regular expression searched in a program's path,
    #: the version in group 1; '' for none): guard.fleet.hostinfo
    native_version: str
    #: the hook transcript it reads at every hook call for results without a decision
    #: (``transcript_path`` in its payload: guard.hooks.missed), False for none
    reads_transcript: bool
    #: the environment variables its parts read while deciding a call (a name, or a
    #: prefix when it ends in ``_``): the hook client's daemon serves only callers whose
    #: values equal its own (guard.hooks.hookclient, through :mod:`guard.hosts.hook_env`)
    environment: tuple[str, ...]

    def __init__(
        self,
        name: str,
        title: str,
        version: str,
        packages: tuple[str, ...] = (),
        dialect: str = "",
        protected: tuple[str, ...] = (),
        planning: Planning | None = None,
        changing_tools: frozenset[str] = frozenset(),
        checklist: Checklist | None = None,
        parts: frozenset[str] = frozenset(),
        hook_files: tuple[str, ...] = (),
        native_version: str = "",
        reads_transcript: bool = False,
        environment: tuple[str, ...] = (),
    ) -> None:
        _set(self, "name", name)
        _set(self, "title", title)
        _set(self, "version", version)
        _set(self, "packages", packages)
        _set(self, "dialect", dialect)
        _set(self, "protected", protected)
        _set(self, "planning", planning)
        _set(self, "changing_tools", changing_tools)
        _set(self, "checklist", checklist)
        _set(self, "parts", parts)
        _set(self, "hook_files", hook_files)
        _set(self, "native_version", native_version)
        _set(self, "reads_transcript", reads_transcript)
        _set(self, "environment", environment)
        unknown = self.parts - PARTS
        if unknown:
            raise ValueError(f"host {self.name!r}: unknown parts {sorted(unknown)}")

    @property
    def module(self) -> str:
        """Its name as a Python identifier: the name of its package."""
        return self.name.replace("-", "_")

    @property
    def package(self) -> str:
        """Its package: ``guard.hosts.<module>``."""
        return f"guard.hosts.{self.module}"

    @property
    def hooked(self) -> bool:
        """Whether guard wires a hook into it (``guard install``, the hook's argument)."""
        return "hook" in self.parts

    @property
    def owns_dialect(self) -> bool:
        """Whether its dialect is its own (its ``tool_table`` part)."""
        return "tool_table" in self.parts

    @property
    def importable(self) -> bool:
        """Whether ``guard import`` reads its settings."""
        return "importer" in self.parts

    @property
    def replayable(self) -> bool:
        """Whether ``guard replay`` reads its transcripts."""
        return "transcript" in self.parts

    def part(self, name: str) -> ModuleType:
        """Its part ``name`` (a module of its package), imported now; LookupError without."""
        if name not in self.parts:
            raise LookupError(f"host {self.name!r} has no {name} part")
        return importlib.import_module(f"{self.package}.{name}")

    def tools(self) -> Mapping[str, Handler]:
        """The tool table of its own dialect."""
        found: Mapping[str, Handler] = self.part("tool_table").TOOLS
        return found

    def importer(self) -> Callable[[Any, str], Draft]:
        """``guard import NAME``: the function turning its settings into a policy draft."""
        found: Callable[[Any, str], Draft] = self.part("importer").convert
        return found

    def reader(self) -> Reader:
        """``guard replay``: the reader of its transcripts."""
        found: Reader = self.part("transcript").READER
        return found

    def gestures(self) -> Gestures | None:
        """Its planning gestures (guard's planning hook), None when it has none of its own."""
        if "gestures" not in self.parts:
            return None
        found: Gestures = self.part("gestures").GESTURES
        return found

    def planning_hooks(self) -> tuple[tuple[str, str | None], ...]:
        """The (event, matcher) pairs ``guard install`` wires to the planning hook."""
        return self.planning.hook_events if self.planning is not None else ()

    def follows(self, what: str = "") -> str:
        """The format its adapter follows: ``Codex CLI 0.171.0 hooks (npm @openai/codex)``."""
        npm = f" (npm {self.packages[0]})" if self.packages else ""
        return " ".join(w for w in (self.title, self.version, what) if w) + npm
