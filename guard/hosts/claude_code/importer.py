"""Claude Code ``permissions`` (settings.json) -> a guard policy.

Claude Code rules are ``Tool`` or ``Tool(specifier)`` in ``permissions.allow``,
``ask`` and ``deny``; deny > ask > allow whatever the order, as in guard. Path
specifiers follow gitignore with four anchors: ``//abs``, ``~/home``, ``/path``
(relative to the settings file's project) and ``path`` / ``./path`` (relative
to the current directory). Guard anchors ``/path`` and relative paths at the
worktree root; each such difference becomes a note.
"""

from __future__ import annotations

import re
from typing import Any

from guard.effects import GuardError
from guard.importers.common import ACTIONS, AgentDraft, Draft, program_rule

#: ``guard import claude-code``: its argument (name, help), what it does, examples.
ARGUMENT = ("settings", "A Claude Code settings.json.")
SUMMARY = "Convert Claude Code's permissions.allow/ask/deny rules into a guard policy."
EXAMPLES = (
    "guard import claude-code .claude/settings.json",
    "guard import claude-code ~/.claude/settings.json -o .openoxide/policy.toml",
)
RULE = re.compile(r"^(?P<tool>[A-Za-z_][\w.-]*)(?:\((?P<spec>.*)\))?$", re.DOTALL)
TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("read",),
    "NotebookRead": ("read",),
    "Edit": ("edit", "write", "multiedit", "notebook_edit"),
    "Write": ("write",),
    "MultiEdit": ("multiedit",),
    "NotebookEdit": ("notebook_edit",),
    "Bash": ("bash",),
    "WebFetch": ("webfetch",),
    "WebSearch": ("websearch",),
    "Glob": ("glob",),
    "Grep": ("grep",),
    "LS": ("list",),
    "Task": ("task",),
    "Agent": ("task",),
    "TodoWrite": ("todowrite",),
    "TodoRead": ("todoread",),
    "ExitPlanMode": ("plan_exit",),
    "AskUserQuestion": ("request_user_input",),
}
PATH_KINDS: dict[str, tuple[str, ...]] = {
    "Read": ("read",),
    "NotebookRead": ("read",),
    "Edit": ("write", "delete"),
    "Write": ("write",),
    "MultiEdit": ("write",),
    "NotebookEdit": ("write",),
}
_PROGRAM = re.compile(r"^([A-Za-z0-9_.+-]+)(?::\*| \*)?$")


def convert_path(spec: str, where: str, draft: Draft) -> str | None:
    """A Claude Code path specifier as a guard pattern (None when it cannot be)."""
    notes = draft.notes
    negated = spec.startswith("!")
    body = spec[1:] if negated else spec
    if not body:
        notes.add(where, "empty path specifier; not converted")
        return None
    if body.startswith("//"):
        out = body
    elif body.startswith("~/"):
        out = "{home}/" + body[2:]
    elif body == "~":
        out = "{home}/**"
    elif body.startswith("~"):
        notes.add(where, f"{spec!r}: another user's home cannot be expressed; not converted")
        return None
    elif body.startswith("/"):
        notes.add(
            where,
            f"{spec!r}: Claude Code anchors '/path' at the settings file's project; guard"
            " anchors it at the worktree root (the same directory for project settings, not"
            " for ~/.claude/settings.json)",
        )
        out = body
    elif body.startswith("./"):
        notes.add(
            where,
            f"{spec!r}: Claude Code resolves './path' from the current directory; guard"
            " anchors it at the worktree root",
        )
        out = "/" + body[2:]
    else:
        if "/" in body.rstrip("/"):
            notes.add(
                where,
                f"{spec!r}: relative to the current directory in Claude Code, to the"
                " worktree root in guard",
            )
        out = body
    return ("!" if negated else "") + out


def convert(data: dict[str, Any], source: str) -> Draft:
    perms = data.get("permissions")
    if not isinstance(perms, dict):
        raise GuardError(
            f"{source}: no \"permissions\" object; expected Claude Code settings like"
            ' {"permissions": {"allow": [...], "deny": [...]}}'
        )
    draft = Draft(source, f"imported from Claude Code settings {source}")
    mode_name = perms.get("defaultMode", "default")
    mode = "plan" if mode_name == "plan" else "build"
    agent = AgentDraft(
        mode, "ask", f"Claude Code permissions from {source} (defaultMode {mode_name!r})"
    )
    draft.agents["claude-code"] = agent
    # Claude Code's built-in behaviour: read-only tools run, edits and commands ask
    for t in ("read", "glob", "grep", "list", "todoread", "websearch"):
        agent.tools[t] = "allow"
    agent.add("read", "allow", "**")
    draft.notes.add(
        "defaults",
        "Claude Code reads the project without asking: read.allow = ['**']; everything"
        " else asks (agent default 'ask')",
    )
    if mode_name == "acceptEdits":
        agent.add("write", "allow", "**")
        draft.notes.add("defaultMode", "acceptEdits: writes inside the worktree are allowed")
    elif mode_name == "bypassPermissions":
        agent.default = "allow"
        draft.notes.add(
            "defaultMode",
            "bypassPermissions: agent default 'allow'; guard's protected paths still hold",
        )
    elif mode_name == "dontAsk":
        agent.default = "deny"
        draft.notes.add("defaultMode", "dontAsk: what is not allowed is denied (default 'deny')")
    elif mode_name not in ("default", "plan"):
        draft.notes.add("defaultMode", f"unknown mode {mode_name!r}; treated as 'default'")
    known = (*ACTIONS, "defaultMode", "additionalDirectories", "disableBypassPermissionsMode")
    for key in perms:
        if key not in known:
            draft.notes.add(f"permissions.{key}", "unknown key; not converted")
    for i, d in enumerate(perms.get("additionalDirectories") or []):
        where = f"permissions.additionalDirectories[{i}]"
        if isinstance(d, str) and d.startswith("/"):
            agent.add("read", "allow", "/" + d.rstrip("/") + "/**")
            draft.notes.add(where, f"{d!r}: converted to a read allow; writes there still ask")
        elif isinstance(d, str) and d.startswith("~/"):
            agent.add("read", "allow", "{home}/" + d[2:].rstrip("/") + "/**")
        else:
            draft.notes.add(where, f"{d!r}: relative directories are not converted")
    for action in ("deny", "ask", "allow"):
        rules = perms.get(action) or []
        if not isinstance(rules, list):
            raise GuardError(f"{source}: permissions.{action} must be a list of rule strings")
        for i, text in enumerate(rules):
            _rule(draft, agent, action, text, f"permissions.{action}[{i}]")
    return draft


def _rule(draft: Draft, agent: AgentDraft, action: str, text: Any, where: str) -> None:
    notes = draft.notes
    if not isinstance(text, str):
        notes.add(where, f"{text!r} is not a rule string; not converted")
        return
    m = RULE.match(text.strip())
    if m is None:
        notes.add(where, f"{text!r}: not a Tool or Tool(specifier) rule; not converted")
        return
    tool, spec = m.group("tool"), m.group("spec")
    if tool.startswith("mcp__"):
        parts = tool.split("__")
        if spec is not None:
            notes.add(where, f"{text!r}: MCP rules take no specifier; not converted")
        elif len(parts) >= 3 and parts[2] and parts[2] != "*":
            agent.set_tool(tool, action, notes, where)
        else:
            notes.add(
                where,
                f"{text!r}: a whole MCP server; guard's tool table names tools one by one"
                " (add mcp__server__tool entries); not converted",
            )
        return
    if spec is None or spec in ("", "*"):
        canon = TOOLS.get(tool)
        if canon is None:
            notes.add(where, f"{text!r}: unknown Claude Code tool; not converted")
            return
        for c in canon:
            agent.set_tool(c, action, notes, where)
        return
    if tool in PATH_KINDS:
        if tool != "Read" and tool != "Edit":
            notes.add(
                where,
                f"{text!r}: Claude Code applies path rules through Edit(...) only; guard"
                " enforces this one for writes",
            )
        pattern = convert_path(spec, where, draft)
        if pattern is None:
            return
        for kind in PATH_KINDS[tool]:
            agent.add(kind, action, pattern)
        if tool in ("Edit", "Write") and action == "allow":
            for c in TOOLS[tool]:
                agent.tools.setdefault(c, "allow")
        return
    if tool == "WebFetch":
        if spec.startswith("domain:"):
            agent.add("network", action, spec[len("domain:") :])
            if action == "allow":
                agent.tools.setdefault("webfetch", "allow")
        else:
            notes.add(where, f"{text!r}: only WebFetch(domain:HOST) converts")
        return
    if tool == "Bash":
        prog = _PROGRAM.match(spec.strip())
        if prog is not None and action in ("deny", "ask"):
            program_rule(agent, action, prog.group(1), text, where, notes)
        else:
            notes.add(
                where,
                f"{text!r}: command-prefix rules do not convert; guard decides shell commands"
                " by their effects (files written, programs run)",
            )
        return
    notes.add(where, f"{text!r}: specifiers for {tool} are not converted")
