"""What importers share: the policy being built, notes, TOML output, validation."""

from __future__ import annotations

# Lazy imports: the shell analysis only when an import has a program rule (import speed).
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard.effects import GuardError
from guard.policy import PolicyError, load_policy

ACTIONS = ("allow", "ask", "deny")
SEVERITY = {"allow": 0, "ask": 1, "deny": 2}


@dataclass
class AgentDraft:
    mode: str
    default: str
    description: str
    tools: dict[str, str] = field(default_factory=dict)
    subagents: list[str] | None = None
    kinds: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, kind: str, list_name: str, pattern: str) -> None:
        lst = self.kinds.setdefault(kind, {}).setdefault(list_name, [])
        if pattern not in lst:
            lst.append(pattern)

    def set_default(self, kind: str, action: str) -> None:
        self.kinds.setdefault(kind, {})["default"] = action

    def set_tool(self, name: str, action: str, notes: Notes, where: str) -> None:
        old = self.tools.get(name)
        if old is not None and old != action:
            keep = old if SEVERITY[old] >= SEVERITY[action] else action
            notes.add(
                where,
                f"tool {name!r} is both {old!r} and {action!r}; kept the stricter {keep!r}",
            )
            action = keep
        self.tools[name] = action


@dataclass
class Notes:
    """What could not be converted, or converts with a different meaning."""

    items: list[str] = field(default_factory=list)

    def add(self, where: str, text: str) -> None:
        line = f"{where}: {text}"
        if line not in self.items:
            self.items.append(line)


#: The agents guard's hooks decide as (the shipped policy's): an import writes the host's
#: own permissions as ``build`` and adds its denials to ``plan``.
BUILD, PLAN = "build", "plan"
#: Kinds whose denials hold in plan mode too; write and delete stay plan mode's own (nothing
#: but the plan file), so a host's "deny every edit" cannot take the plan file away.
PLAN_KINDS = ("read", "exec", "network")
#: Tools the plan agent writes its plan file with: a host's deny of them stays in build.
PLAN_FILE_TOOLS = ("write", "edit", "multiedit", "patch", "apply_patch", "notebook_edit")
KINDS = ("read", "write", "delete", "exec", "network")


@dataclass
class Draft:
    source: str
    description: str
    agents: dict[str, AgentDraft] = field(default_factory=dict)
    notes: Notes = field(default_factory=Notes)
    #: Agents written whole (every list, so that none of the base policy's remains).
    whole: set[str] = field(default_factory=set)
    #: Denials added to the base policy's plan agent: kind -> patterns, and tool names.
    plan_deny: dict[str, list[str]] = field(default_factory=dict)
    plan_tools: list[str] = field(default_factory=list)

    def retarget(self, name: str | None) -> str:
        """Name the host's own permissions (the importer's first agent) ``build``, the agent
        the hooks decide as outside plan mode, and add its denials to ``plan``; with
        ``name``, that agent instead (the hooks must then be pinned to it). The name."""
        first = next(iter(self.agents))
        target = name or BUILD
        if target == PLAN:
            raise GuardError("--agent plan: guard's plan agent is kept as shipped (its"
                             " denials are added to it); name another agent")
        agent = self.agents.pop(first)
        self.agents = {target: agent, **self.agents}
        if target == BUILD:
            self.whole.add(target)
        if name is not None:
            return target
        for a in self.agents.values():
            for kind in PLAN_KINDS:
                for pattern in a.kinds.get(kind, {}).get("deny", []):
                    lst = self.plan_deny.setdefault(kind, [])
                    if pattern not in lst:
                        lst.append(pattern)
            kept = (*PLAN_FILE_TOOLS, "*", "request_user_input", "plan_exit", *self.plan_tools)
            self.plan_tools += [t for t, action in a.tools.items()
                                if action == "deny" and t not in kept]
        return target

    def _plan_lines(self) -> list[str]:
        if not self.plan_deny and not self.plan_tools:
            return []
        base = load_policy("builtin:default").model.agents[PLAN]
        out = ["", "# the host's denials hold in plan mode too (added to the shipped lists)"]
        if self.plan_tools:
            out += ["", f"[agents.{PLAN}.tools]"]
            out += [f"{_key(t)} = \"deny\"" for t in self.plan_tools]
        for kind, patterns in self.plan_deny.items():
            shipped = list(getattr(base, kind).deny)
            out += ["", f"[agents.{PLAN}.{kind}]",
                    f"deny = {_list(shipped + [p for p in patterns if p not in shipped])}"]
        return out

    def to_toml(self) -> str:
        out = [
            f"# Imported by `guard import` from {self.source}.",
            "# Review every note below before using this policy; then run `guard lint`.",
        ]
        if self.notes.items:
            out.append("#")
            out.append("# Notes (constructs that were not converted or mean something else here):")
            out += [f"#  - {n}" for n in self.notes.items]
        out += [
            "version = 1",
            'extends = ["builtin:default"]  # the shipped plan and build agents',
            f"description = {_s(self.description)}",
        ]
        for name, a in self.agents.items():
            out += ["", f"[agents.{_key(name)}]", f"mode = {_s(a.mode)}",
                    f"default = {_s(a.default)}", f"description = {_s(a.description)}"]
            if a.subagents is not None:
                out.append(f"subagents = {_list(a.subagents)}")
            whole = name in self.whole
            tools = dict(a.tools)
            if a.mode == "build" and "request_user_input" not in tools:
                # plan mode's question tool; a build agent that may call it stalls (GL206)
                tools = {"request_user_input": "deny", **tools}
            if whole:  # the shipped agent's tool table merges key by key: close it
                tools.setdefault("plan_exit", "deny")
                tools.setdefault("*", a.default)
            if tools:
                out += ["", f"[agents.{_key(name)}.tools]"]
                out += [f"{_key(t)} = {_s(v)}" for t, v in tools.items()]
            for kind in KINDS:
                rules = a.kinds.get(kind)
                if not rules and not whole:
                    continue
                rules = rules or {}
                out += ["", f"[agents.{_key(name)}.{kind}]"]
                for list_name in ACTIONS:
                    if rules.get(list_name) or whole:  # whole: an empty list replaces one
                        out.append(f"{list_name} = {_list(rules.get(list_name, []))}")
                if "default" in rules or whole:
                    out.append(f"default = {_s(rules.get('default', a.default))}")
        out += self._plan_lines()
        return "\n".join(out) + "\n"


def program_effects(program: str) -> tuple[bool, set[str]]:
    """What guard's shell analysis gives a run of ``program`` on a file: (whether one of
    its effects is the exec of the program itself, the kinds of the others)."""
    from guard.analysis.shell import analyse

    runs_itself, others = False, set()
    for effect in analyse(f"{program} file", cwd=tempfile.gettempdir()):
        kind = effect.kind.value
        if kind == "exec" and effect.target and os.path.basename(effect.target) == program:
            runs_itself = True
        else:
            others.add(kind)
    return runs_itself, others


#: Everywhere a path can be: the worktree (unanchored) and every absolute path.
EVERYWHERE = ["//**"]


def program_rule(agent: AgentDraft, action: str, program: str, rule: str, where: str,
                 notes: Notes) -> None:
    """A host's deny (or ask) of one program, kept with its meaning: the rule covers every
    effect guard's shell analysis gives that program, or is refused with the reason."""
    runs_itself, others = program_effects(program)
    if runs_itself:  # the exec of the program is one of its effects: denying it refuses the call
        agent.add("exec", action, "//**/" + program)
        notes.add(where, f"{rule!r}: converted to exec {action} of program {program!r}: guard"
                  " runs it as a program, so the rule covers every way of running it, not"
                  " only this command prefix")
        return
    if others == {"delete"}:
        for pattern in EVERYWHERE:
            agent.add("delete", action, pattern)
        if action == "deny":  # nothing below a deny of every path is ever reached
            rules = agent.kinds["delete"]
            rules["allow"], rules["ask"] = [], []
        notes.add(where, f"{rule!r}: guard sees {program!r} as a delete, not as a program"
                  f" run (an exec rule for it would never match): converted to delete"
                  f" {action} everywhere, which covers every way of running it (and every"
                  " delete by any other program or tool: stricter than the host's rule)")
        return
    kinds = ", ".join(sorted(others))
    notes.add(where, f"{rule!r}: refused: guard decides {program!r} by what it does ({kinds}),"
              f" not by its name, so an exec rule for it would never match, and a {action} of"
              f" every {kinds} would refuse far more than {program!r}; not converted: write"
              " path rules (write.deny, read.deny) or network rules for what it must not touch")


def _s(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _key(name: str) -> str:
    bare = name.replace("_", "").replace("-", "").isalnum() and name.isascii()
    return name if bare else _s(name)


def _list(items: list[str]) -> str:
    if sum(len(i) + 4 for i in items) < 80:
        return "[" + ", ".join(_s(i) for i in items) + "]"
    return "[\n" + "".join(f"    {_s(i)},\n" for i in items) + "]"


def read_json(path: str, what: str) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GuardError(f"{path}: no such file; pass the {what}") from None
    except IsADirectoryError:
        raise GuardError(f"{path}: is a directory; pass the {what} file") from None
    except UnicodeDecodeError as exc:
        raise GuardError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except OSError as exc:
        raise GuardError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GuardError(
            f"{path}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise GuardError(f"{path}:1: expected a JSON object at the top level")
    return data


def validate(text: str) -> None:
    """The generated policy must load; an importer bug is reported, never written."""
    fd, tmp = tempfile.mkstemp(suffix=".toml", prefix="guard-import-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_policy(tmp)
    except PolicyError as exc:
        raise GuardError(f"the converted policy does not load (a guard bug): {exc}") from None
    finally:
        os.unlink(tmp)


def write_atomically(path: Path, text: str, force: bool) -> None:
    if path.exists() and not force:
        raise GuardError(f"{path} exists; pass --force to replace it")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
