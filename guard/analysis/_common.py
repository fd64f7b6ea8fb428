"""Handlers shared by several dialects (the same kind of tool, different field names)."""

from __future__ import annotations

# Lazy imports: the shell parser (tree-sitter) only for a shell or patch tool call, so
# that a hook deciding a Read or a Write does not load it (start-up speed).
import os
from collections.abc import Callable
from dataclasses import replace

from guard.analysis.dialect import (
    Handler,
    ToolCall,
    ToolInputError,
    glob_base,
    tool,
    under,
    url_host,
)
from guard.effects import Effect


def path_tool(canonical: str, kind: str, *fields: str) -> Handler:
    """A tool acting on one path field: ``read``, ``write`` or ``delete`` it."""

    def handler(call: ToolCall) -> list[Effect]:
        path = call.str_field(*fields, what=f"the file to {kind}, a path")
        assert path is not None
        make: Callable[[str, str], Effect] = getattr(Effect, kind)
        return [tool(canonical, f"{call.dialect} {call.name}"),
                make(path, f"{call.dialect} {call.name} {kind}s it")]

    return handler


def search_tool(canonical: str, path_fields: tuple[str, ...], pattern_field: str | None,
                default_path: str | None = ".") -> Handler:
    """Glob/grep/list tools: a read of the directory searched (for a glob, of its base).

    With ``default_path=None`` the path field is required.
    """

    def handler(call: ToolCall) -> list[Effect]:
        path = call.str_field(*path_fields, required=default_path is None,
                              what="a directory path")
        root = path if path is not None else default_path
        assert root is not None
        effects = [tool(canonical, f"{call.dialect} {call.name}")]
        if pattern_field is not None:
            pattern = call.str_field(pattern_field, what="a pattern")
            assert pattern is not None
            if canonical == "glob":
                base = glob_base(pattern)
                target = root if base == "." else under(root, base)
                effects.append(Effect.read(target, f"{call.name} matches {pattern!r} below it"))
                return effects
        effects.append(Effect.read(root, f"{call.name} reads below it"))
        return effects

    return handler


def shell_tool(canonical: str, command_fields: tuple[str, ...],
               workdir_fields: tuple[str, ...] = ()) -> Handler:
    """A shell tool: its command analysed by :mod:`guard.analysis.shell`."""
    # the tool effect by (dialect, tool name): an Effect is immutable, so one object
    # serves every call of the same tool (bounded: names come from the host)
    tools: dict[tuple[str, str], Effect] = {}

    def handler(call: ToolCall) -> list[Effect]:
        workdir = call.str_field(*workdir_fields, required=False, what="a directory path") if \
            workdir_fields else None
        value = None
        used = command_fields[0]
        for name in command_fields:
            if call.input.get(name) is not None:
                value, used = call.input[name], name
                break
        # where the command really runs, for looking at the filesystem (cp into a dir...)
        run_in = call.cwd
        if workdir:
            run_in = workdir if os.path.isabs(workdir) else (
                os.path.join(call.cwd, workdir) if call.cwd else None)
        from guard.analysis import shell

        if isinstance(value, str):
            found = shell.analyse(value, run_in)
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            found = shell.analyse_argv(list(value), run_in)
        else:
            raise ToolInputError(
                f"{call.where(used)} must be a command string or a non-empty list of strings"
                f" (argv), got {type(value).__name__ if value is not None else 'nothing'}"
            )
        key = (call.dialect, call.name)
        first = tools.get(key)
        if first is None:
            if len(tools) >= 64:
                tools.clear()
            first = tools[key] = tool(canonical, f"{call.dialect} {call.name}")
        effects = [first]
        if workdir:
            effects.append(Effect.read(workdir, f"{call.name} runs in this directory"))
        if not workdir:
            effects.extend(found)
            return effects
        for e in found:
            if e.target is not None and e.kind.value in ("read", "write", "delete"):
                e = replace(e, target=under(workdir, e.target))
            effects.append(e)
        return effects

    return handler


def fetch_tool(canonical: str, url_field: str) -> Handler:
    def handler(call: ToolCall) -> list[Effect]:
        url = call.str_field(url_field, what="a URL")
        assert url is not None
        return [tool(canonical, f"{call.dialect} {call.name}"),
                Effect.network(url_host(url), f"{call.name} fetches {url}")]

    return handler


def plain(canonical: str) -> Handler:
    """A tool with no effect beyond itself (plan exit, questions, checklists...)."""

    def handler(call: ToolCall) -> list[Effect]:
        return [tool(canonical, f"{call.dialect} {call.name}")]

    return handler


def patch_tool(canonical: str, *fields: str) -> Handler:
    """apply_patch-style tools: the patch body's headers become writes and deletes."""

    def handler(call: ToolCall) -> list[Effect]:
        body = call.str_field(*fields, what="a patch body (*** Begin Patch ...)")
        assert body is not None
        from guard.analysis.shell import parse_patch

        return [tool(canonical, f"{call.dialect} {call.name}"), *parse_patch(body)]

    return handler


def edits_tool(canonical: str, path_fields: tuple[str, ...], edits_field: str) -> Handler:
    """MultiEdit-style tools: one path, a list of edits (checked to be a list)."""
    inner = path_tool(canonical, "write", *path_fields)

    def handler(call: ToolCall) -> list[Effect]:
        edits = call.input.get(edits_field)
        if not isinstance(edits, list):
            raise ToolInputError(f"{call.where(edits_field)} must be a list of edits,"
                                 f" got {type(edits).__name__}")
        return inner(call)

    return handler
