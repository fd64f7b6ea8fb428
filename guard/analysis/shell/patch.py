"""apply_patch (Codex's patch format), also reachable from a shell."""

from __future__ import annotations

import re

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.registry import program
from guard.analysis.shell.words import Arg
from guard.effects import Effect, EffectKind

_PATCH_HEADER = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.*)$")


def parse_patch(body: str) -> list[Effect]:
    """Effects of an apply_patch body: writes for Add/Update/Move to, deletes for Delete."""
    effects: list[Effect] = []
    last_update: str | None = None
    seen_header = False
    for raw in body.splitlines():
        line = raw.rstrip("\r")
        m = _PATCH_HEADER.match(line)
        if not m:
            if line.startswith("*** ") and line.strip() not in ("*** Begin Patch", "*** End Patch",
                                                                "*** End of File"):
                effects.append(Effect.write(None, f"apply_patch: unrecognised header {line!r}"))
            continue
        seen_header = True
        op, path = m.group(1), m.group(2).strip()
        if not path:
            effects.append(Effect.write(None, f"apply_patch: {op} without a path"))
            continue
        if op == "Add File":
            effects.append(Effect.write(path, "apply_patch adds it"))
            last_update = None
        elif op == "Update File":
            effects.append(Effect.write(path, "apply_patch updates it"))
            last_update = path
        elif op == "Delete File":
            effects.append(Effect.delete(path, "apply_patch deletes it"))
            last_update = None
        else:  # Move to
            effects.append(Effect.write(path, "apply_patch moves a file here"))
            if last_update is None:
                effects.append(Effect.write(None, "apply_patch: Move to without Update File"))
            else:
                effects.append(Effect.delete(last_update, "apply_patch moves it away"))
    if not seen_header:
        effects.append(Effect.write(None, "apply_patch: no file headers found in the patch"))
    return effects


@program("apply_patch", "applypatch")
def _apply_patch(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    body = args[0].text if args else heredoc
    if body is None:
        ctx.unknown_write("apply_patch with a computed patch")
        return
    for e in parse_patch(body):
        if e.target is None or e.kind is EffectKind.TOOL:
            ctx.add(e)
        else:
            ctx.path(e.kind, e.target, e.detail)

