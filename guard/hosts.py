"""The host agents guard knows: one frozen :class:`Host` record per host, in one registry.

Every host list in guard derives from :data:`HOSTS` (the hook adapters, the planning
hook, the transcript readers, ``guard import``, the tool-call dialects, the fleet's
version lookup), and a host's name is written here only: other modules say
``hosts.CLAUDE_CODE.name``. Adding a host is one entry here plus its modules, one
per mechanism (``guard/analysis/<host>.py``, ``guard/hooks/<host>.py``, ...).

The record names its modules by dotted path (``"package.module"`` or
``"package.module:attribute"``) and :func:`load` imports them when asked, so this
module imports nothing of guard: the hook's start-up path reads it without paying for
the dialects, the importers or the readers (and no import cycle goes through it).

>>> [h.name for h in HOSTS]
['claude-code', 'codex', 'opencode', 'gemini', 'cursor', 'aider']
>>> by_name("gemini").version
'0.61.0'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Planning:
    """The planning gestures of a host: how guard's planning hook talks to it."""

    #: the hook events whose answer is context for the model
    context_events: tuple[str, ...]
    #: the (event, matcher) pairs ``guard install`` wires to the planning hook
    hook_events: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class Checklist:
    """The tool a host's model keeps its checklist with, and where the steps are in its input."""

    #: the tool's name in the host's dialect
    tool: str
    #: the key of the list of steps in the tool's input
    key: str
    #: the keys of a step's text, first found wins
    text_keys: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Host:
    """One host agent: what guard pins, protects and runs for it."""

    #: the name on guard's command line (``guard install NAME``, the hook's argument)
    name: str
    #: the product's own name, for prose
    title: str
    #: the version guard follows and tests against (scripts/test.sh keeps its own copy)
    version: str
    #: npm packages of its CLI (native builds' platform packages included), first the main one
    packages: tuple[str, ...] = ()
    #: the tool-call dialect of its calls (:data:`guard.analysis.DIALECTS`), '' without hooks
    dialect: str = ""
    #: the module of that dialect's table, when the dialect is this host's own
    dialect_module: str | None = None
    #: its hook settings: denied for writes in every agent (``{home}`` patterns and
    #: project patterns, in :data:`guard.decide.PROTECTED_PATTERNS`' syntax)
    protected: tuple[str, ...] = ()
    #: the module of its hook adapter (its ``ADAPTER``), None when it has no hooks
    adapter: str | None = None
    #: its planning gestures, None when guard's planning hook does not serve it
    planning: Planning | None = None
    #: ``guard import NAME``: the function turning its settings into a policy draft
    importer: str | None = None
    #: ``guard replay``: the reader class of its transcripts
    reader: str | None = None
    #: tools whose result means something may have changed (a missed hook's evidence)
    changing_tools: frozenset[str] = frozenset()
    #: its checklist tool, shown in the plan's checklist lane
    checklist: Checklist | None = None

    def follows(self, what: str = "") -> str:
        """The format its adapter follows: ``Codex CLI 0.171.0 hooks (npm @openai/codex)``."""
        npm = f" (npm {self.packages[0]})" if self.packages else ""
        return " ".join(w for w in (self.title, self.version, what) if w) + npm


CLAUDE_CODE = Host(
    name="claude-code",
    title="Claude Code",
    version="2.1.332",
    packages=("@anthropic-ai/claude-code",),
    dialect="claude-code",
    dialect_module="guard.analysis.claude_code",
    protected=("/.claude/settings*.json", "{home}/.claude/settings*.json"),
    adapter="guard.hooks.claude_code",
    planning=Planning(
        context_events=("SessionStart", "UserPromptSubmit"),
        hook_events=(
            ("SessionStart", None),
            ("UserPromptSubmit", None),
            ("PreToolUse", "ExitPlanMode"),
            ("PostToolUse", "ExitPlanMode"),
        ),
    ),
    importer="guard.importers.claude_code:convert",
    reader="guard.replay.readers:ClaudeCode",
    changing_tools=frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit", "Bash"}),
    checklist=Checklist("TodoWrite", "todos", ("content",)),
)
CODEX = Host(
    name="codex",
    title="Codex CLI",
    version="0.171.0",
    packages=("@openai/codex",),
    dialect="codex",
    dialect_module="guard.analysis.codex",
    protected=("/.codex/", "{home}/.codex/"),
    adapter="guard.hooks.codex",
    planning=Planning(
        context_events=("SessionStart", "UserPromptSubmit"),
        hook_events=(("SessionStart", None), ("UserPromptSubmit", None), ("Stop", None)),
    ),
    reader="guard.replay.readers:Codex",
    changing_tools=frozenset({"Bash", "apply_patch"}),
    checklist=Checklist("update_plan", "plan", ("step",)),
)
GEMINI = Host(
    name="gemini",
    title="Gemini CLI",
    version="0.61.0",
    packages=("@google/gemini-cli",),
    dialect="gemini",
    dialect_module="guard.analysis.gemini",
    protected=(
        "/.gemini/settings.json",
        "{home}/.gemini/settings.json",
        "{home}/.gemini/trustedFolders.json",
    ),
    adapter="guard.hooks.gemini",
    planning=Planning(
        context_events=("SessionStart", "BeforeAgent"),
        hook_events=(
            ("SessionStart", None),
            ("BeforeAgent", None),
            ("BeforeTool", "exit_plan_mode"),
        ),
    ),
    reader="guard.replay.readers:Gemini",
    changing_tools=frozenset({"write_file", "replace", "run_shell_command"}),
    checklist=Checklist("write_todos", "todos", ("description",)),
)
CURSOR = Host(
    name="cursor",
    title="Cursor",
    version="1.7",  # its documented agent hooks (hooks.json version 1); no Cursor runs here
    dialect="claude-code",  # shell and reads; MCP calls use the mcp dialect
    protected=("/.cursor/hooks.json", "{home}/.cursor/hooks.json"),
    adapter="guard.hooks.cursor",
)
OPENCODE = Host(
    name="opencode",
    title="OpenCode",
    version="1.18.33",
    packages=("opencode-ai", "opencode"),
    dialect="opencode",
    dialect_module="guard.analysis.opencode",
    protected=("/.opencode/plugin/", "{home}/.config/opencode/plugin/"),
    adapter="guard.hooks.opencode",
    importer="guard.importers.opencode:convert",
    reader="guard.replay.readers:OpenCode",
    changing_tools=frozenset({"write", "edit", "multiedit", "patch", "bash"}),
    checklist=Checklist("todowrite", "todos", ("content",)),
)
AIDER = Host(
    name="aider",
    title="Aider",
    version="0.86.2",  # no hooks: confined by ``guard run`` (tests/e2e/test_aider_cli.py)
)

#: Every host, in the order guard lists them.
HOSTS: tuple[Host, ...] = (CLAUDE_CODE, CODEX, OPENCODE, GEMINI, CURSOR, AIDER)
#: Every host name, in that order.
NAMES: tuple[str, ...] = tuple(h.name for h in HOSTS)
#: The hosts with a hook adapter (``guard install``, the hook's argument).
HOOKED: tuple[str, ...] = tuple(h.name for h in HOSTS if h.adapter)
#: The tool-call dialects of the hosts (several hosts may share one), in that order.
DIALECTS: tuple[str, ...] = tuple(dict.fromkeys(h.dialect for h in HOSTS if h.dialect))
#: The hosts guard's planning hook serves.
PLANNED: tuple[str, ...] = tuple(h.name for h in HOSTS if h.planning)
#: The hosts ``guard import`` reads settings of.
IMPORTABLE: tuple[str, ...] = tuple(h.name for h in HOSTS if h.importer)
#: The hosts ``guard replay`` reads transcripts of.
REPLAYABLE: tuple[str, ...] = tuple(h.name for h in HOSTS if h.reader)

_BY_NAME = {h.name: h for h in HOSTS}


def by_name(name: str) -> Host:
    """The host called ``name``; KeyError for a name guard does not know."""
    return _BY_NAME[name]


def get(name: str) -> Host | None:
    """The host called ``name``, or None."""
    return _BY_NAME.get(name)


def load(ref: str) -> Any:
    """Import what a dotted reference names: a module, or ``module:attribute``."""
    module, _, attribute = ref.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded
