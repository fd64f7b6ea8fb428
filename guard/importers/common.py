"""What importers share: the policy being built, notes, TOML output, validation."""

from __future__ import annotations

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


@dataclass
class Draft:
    source: str
    description: str
    agents: dict[str, AgentDraft] = field(default_factory=dict)
    notes: Notes = field(default_factory=Notes)

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
            tools = dict(a.tools)
            if a.mode == "build" and "request_user_input" not in tools:
                # plan mode's question tool; a build agent that may call it stalls (GL206)
                tools = {"request_user_input": "deny", **tools}
            if tools:
                out += ["", f"[agents.{_key(name)}.tools]"]
                out += [f"{_key(t)} = {_s(v)}" for t, v in tools.items()]
            for kind in ("read", "write", "delete", "exec", "network"):
                rules = a.kinds.get(kind)
                if not rules:
                    continue
                out += ["", f"[agents.{_key(name)}.{kind}]"]
                for list_name in ACTIONS:
                    if rules.get(list_name):
                        out.append(f"{list_name} = {_list(rules[list_name])}")
                if "default" in rules:
                    out.append(f"default = {_s(rules['default'])}")
        return "\n".join(out) + "\n"


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
