"""OpenCode ``permission`` (opencode.json) -> a guard policy.

OpenCode's pattern rules differ from guard's in two ways the conversion keeps
honest: ``*`` crosses ``/`` (guard's ``*`` stays inside one path component), and
inside one permission the *last* matching rule wins whatever its action (guard:
deny > ask > allow). Order is kept by writing each list as a gitignore file with
``!`` exceptions for the later rules of other actions.
"""

from __future__ import annotations

from typing import Any

from guard.effects import GuardError
from guard.hosts.claude_code.importer import _PROGRAM
from guard.importers.common import ACTIONS, AgentDraft, Draft, Notes, program_rule, read_json
from guard.lint.rule_context import FAKE_ROOTS, pattern_samples
from guard.match import CompiledList, parse_pattern

__all__ = ["convert", "convert_glob", "ordered", "read_json"]

#: ``guard import opencode``: its argument (name, help), what it does, examples.
ARGUMENT = ("config", "An opencode.json.")
SUMMARY = "Convert OpenCode's permission settings (and per-agent ones) into a guard policy."
EXAMPLES = (
    "guard import opencode opencode.json",
    "guard import opencode opencode.json -o .openoxide/policy.toml --force",
)
SIMPLE_TOOLS = {
    "webfetch": "webfetch",
    "websearch": "websearch",
    "codesearch": "websearch",
    "todowrite": "todowrite",
    "todoread": "todoread",
    "question": "question",
    "lsp": "lsp",
    "skill": "skill",
}
EDIT_TOOLS = ("edit", "write", "multiedit", "patch", "apply_patch")


def convert_glob(pattern: str, where: str, notes: Notes) -> str:
    """An OpenCode wildcard (``*`` crosses ``/``) as a gitignore pattern."""
    if pattern in ("*", "**"):
        return "**"
    body = pattern
    prefix = ""
    if body.startswith("~/"):
        prefix, body = "{home}/", body[2:]
    elif body.startswith("/"):
        prefix, body = "//", body[1:]
    elif body.startswith("./"):
        prefix, body = "/", body[2:]
    if "*" not in body:
        return prefix + body
    parts = body.split("/")
    if len(parts) == 1 and not prefix:
        if not body.startswith("*") or "*" in body[1:]:
            notes.add(
                where,
                f"{pattern!r}: OpenCode's '*' crosses '/', guard's matches inside one name;"
                " converted as a name pattern at any depth",
            )
        return body
    out: list[str] = []
    for i, seg in enumerate(parts):
        last = i == len(parts) - 1
        if seg in ("*", "**"):
            if not out or out[-1] != "**":
                out.append("**")
        elif "*" in seg and last:
            if not out or out[-1] != "**":
                out.append("**")
            out.append(seg)
        elif "*" in seg:
            out.append(seg)
            notes.add(
                where,
                f"{pattern!r}: '*' inside the directory part {seg!r} crosses '/' in OpenCode"
                " but not in guard; kept as written (it matches less)",
            )
        else:
            out.append(seg)
    converted = prefix + "/".join(out)
    if converted != prefix + body:
        notes.add(
            where,
            f"{pattern!r} -> {converted!r}: OpenCode's '*' crosses '/'; '**' says so in guard",
        )
    return converted


def ordered(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Last-match-wins rules as three gitignore lists with the same meaning.

    Each list holds its action's patterns, and after the first of them a ``!``
    exception for every later rule of another action, so the later rule wins.
    """
    out: dict[str, list[str]] = {a: [] for a in ACTIONS}
    for pattern, action in pairs:
        for list_name in ACTIONS:
            if action == list_name:
                out[list_name].append(pattern)
            elif _overlaps(out[list_name], pattern):
                out[list_name].append("!" + pattern)
    return out


def _overlaps(earlier: list[str], pattern: str) -> bool:
    """Could an earlier pattern of a list match a path ``pattern`` matches?

    Checked on samples of ``pattern``. A missed overlap drops an exception, which
    only ever makes the result stricter: exceptions in the deny and ask lists carve
    out for later, laxer rules; those in the allow list are for rules that win anyway.
    """
    positives = [p for p in (parse_pattern(e) for e in earlier) if p is not None]
    target = parse_pattern(pattern)
    if not positives or target is None:
        return False
    roots = {
        "worktree": str(FAKE_ROOTS.worktree), "plans": str(FAKE_ROOTS.plans),
        "data": str(FAKE_ROOTS.data), "home": str(FAKE_ROOTS.home), "tmp": str(FAKE_ROOTS.tmp),
    }  # fmt: skip
    compiled = CompiledList(positives, roots)
    base = "" if target.root == "/" else roots[target.root]
    samples = list(pattern_samples(target))
    if not samples:
        return True  # cannot tell: keep the exception (it is harmless)
    return any(compiled.matched(f"{base}/{rel}") is not None for rel in samples)


def _action(value: Any, where: str) -> str:
    if value not in ACTIONS:
        raise GuardError(f"{where}: expected \"allow\", \"ask\" or \"deny\", got {value!r}")
    return str(value)


def convert(data: dict[str, Any], source: str) -> Draft:
    if "permission" not in data and "agent" not in data and "tools" not in data:
        raise GuardError(
            f"{source}: no \"permission\", \"agent\" or \"tools\" key; expected an opencode.json"
            ' like {"permission": {"edit": "ask", "bash": {"*": "ask"}}}'
        )
    draft = Draft(source, f"imported from OpenCode configuration {source}")
    top = data.get("permission", {})
    draft.agents["opencode"] = _agent(draft, "opencode", "build", top, data.get("tools"), "")
    agents = data.get("agent") or {}
    if not isinstance(agents, dict):
        raise GuardError(f"{source}: \"agent\" must be an object")
    for name, spec in agents.items():
        if not isinstance(spec, dict):
            continue
        perm = spec.get("permission")
        tools = spec.get("tools")
        if perm is None and tools is None:
            continue
        merged = _merge(top, perm or {})
        mode = "plan" if name == "plan" else "build"
        draft.agents[f"opencode-{name}"] = _agent(
            draft, f"opencode-{name}", mode, merged, tools, f"agent.{name}."
        )
    return draft


def _merge(top: Any, override: Any) -> Any:
    if isinstance(top, str) or isinstance(override, str):
        return override if override else top
    merged = dict(top)
    merged.update(override)
    return merged


def _agent(
    draft: Draft, name: str, mode: str, perm: Any, tools: Any, prefix: str
) -> AgentDraft:
    notes = draft.notes
    a = AgentDraft(mode, "ask", f"OpenCode permissions ({name})")
    # OpenCode's defaults: everything allowed inside the project, outside asks
    a.tools["*"] = "allow"
    for kind in ("read", "write", "delete"):
        a.add(kind, "allow", "**")
        a.set_default(kind, "ask")
    a.set_default("exec", "allow")
    a.set_default("network", "allow")
    if isinstance(perm, str):
        action = _action(perm, f"{prefix}permission")
        a.tools["*"] = action
        for kind in ("read", "write", "delete"):
            a.kinds[kind] = {action: ["**"], "default": "ask"}
        return a
    if not isinstance(perm, dict):
        raise GuardError(f"{prefix}permission: expected an object or an action string")
    for key, value in perm.items():
        where = f"{prefix}permission.{key}"
        if key in ("read", "edit"):
            kinds = ("read",) if key == "read" else ("write", "delete")
            canon = ("read",) if key == "read" else EDIT_TOOLS
            if isinstance(value, str):
                action = _action(value, where)
                for kind in kinds:
                    a.kinds[kind] = {action: ["**"], "default": a.kinds[kind]["default"]}
                for c in canon:
                    a.tools[c] = action
            elif isinstance(value, dict):
                pairs = [(convert_glob(p, where, notes), _action(v, f"{where}.{p}"))
                         for p, v in value.items()]
                lists = ordered(pairs)
                if any(p.startswith("!") for lst in lists.values() for p in lst):
                    notes.add(
                        where,
                        "rule order matters in OpenCode (last match wins); kept with '!'"
                        " exceptions in guard's lists",
                    )
                for kind in kinds:
                    default = a.kinds[kind]["default"]
                    a.kinds[kind] = {k: list(v) for k, v in lists.items() if v}
                    a.kinds[kind]["default"] = default
                for c in canon:
                    a.tools[c] = "allow"
            else:
                notes.add(where, f"{value!r}: expected an action or an object; not converted")
        elif key == "bash":
            _bash(a, value, where, notes)
        elif key == "task":
            if isinstance(value, str):
                a.tools["task"] = _action(value, where)
            elif isinstance(value, dict):
                a.subagents = [s for s, v in value.items() if v == "allow" and s != "*"]
                a.tools["task"] = _action(value.get("*", "deny"), where)
                for s, v in value.items():
                    if v == "ask" and s != "*":
                        notes.add(where, f"{s!r}: 'ask' for one subagent type is not"
                                  " expressible; left out of subagents (denied)")
                if value.get("*") == "allow":
                    a.subagents.append("*")
        elif key in ("glob", "grep", "list"):
            if isinstance(value, str):
                a.tools[key] = _action(value, where)
            else:
                a.tools[key] = "allow"
                notes.add(where, "path patterns of search tools are not converted; read rules"
                          " decide what they may read")
        elif key == "external_directory":
            if isinstance(value, str):
                action = _action(value, where)
                for kind in ("read", "write", "delete"):
                    a.set_default(kind, action)
                notes.add(where, f"paths outside the worktree: read/write/delete default"
                          f" {action!r} (guard's {{tmp}}, {{home}}... are outside too)")
            else:
                notes.add(where, "per-directory external rules are not converted")
        elif key in SIMPLE_TOOLS and isinstance(value, str):
            a.tools[SIMPLE_TOOLS[key]] = _action(value, where)
            if key == "webfetch":
                a.set_default("network", _action(value, where))
        elif key == "doom_loop":
            notes.add(where, "OpenCode's repeated-call guard has no guard equivalent")
        else:
            notes.add(where, f"{value!r}: not converted")
    if isinstance(tools, dict):
        for t, enabled in tools.items():
            where = f"{prefix}tools.{t}"
            if enabled is False:
                canon = EDIT_TOOLS if t in ("edit", "write", "patch") else (t.lower(),)
                for c in canon:
                    a.tools[c] = "deny"
                if t in ("edit", "write", "patch"):
                    for kind in ("write", "delete"):
                        a.kinds[kind] = {"default": "deny"}
                notes.add(where, "disabled tool -> denied")
    return a


def _bash(a: AgentDraft, value: Any, where: str, notes: Notes) -> None:
    if isinstance(value, str):
        a.tools["bash"] = _action(value, where)
        return
    if not isinstance(value, dict):
        notes.add(where, f"{value!r}: expected an action or an object; not converted")
        return
    a.tools["bash"] = _action(value.get("*", "allow"), f"{where}.*")
    for command, v in value.items():
        if command == "*":
            continue
        action = _action(v, f"{where}.{command}")
        prog = _PROGRAM.match(command.strip())
        if prog is not None and action in ("deny", "ask"):
            program_rule(a, action, prog.group(1), command, f"{where}.{command}", notes)
        else:
            notes.add(where, f"{command!r} = {action!r}: command patterns do not convert;"
                      " guard decides shell commands by their effects")
