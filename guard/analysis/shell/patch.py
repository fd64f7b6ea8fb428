"""apply_patch (Codex's patch format), read as Codex reads it; also reachable from a shell.

Codex CLI (codex-rs/apply-patch, followed as of 0.171) reads a patch thus: the whole
text is trimmed (Unicode whitespace), split into lines at LF (a CR before it dropped);
the first and last lines, trimmed, must be ``*** Begin Patch`` and ``*** End Patch`` (or
the whole is wrapped in a ``<<EOF`` / ``<<'EOF'`` / ``<<"EOF"`` line and a last line
ending in ``EOF``). Between them, hunks: a hunk header is read from its line **trimmed**
(``*** Add File: P``, ``*** Delete File: P``, ``*** Update File: P``; P is the rest of
the trimmed line); an Add hunk takes the following lines that start with ``+``; an
Update hunk takes an optional ``*** Move to: Q`` line (untrimmed, Q as written), then
chunks up to a line starting with ``*`` (blank lines between chunks skipped): a chunk
opens with ``@@`` or ``@@ CONTEXT`` (the first may omit it) and takes lines starting with
a space, ``+`` or ``-``, empty lines, and an ``*** End of File`` line that closes it.
Anything else is an invalid patch, which Codex refuses to apply.

Guard reads the patch that way (:func:`patch_hunks`) and, to decide only on text two
readings cannot disagree on, also the way the format's grammar is written (every
marker exactly at column 0, nothing trimmed); a patch the two readings do not read
into the same files (an indented header, a marker with blanks after it, a wrapped
patch) is an unknown write, and so is one Codex would refuse.
"""

from __future__ import annotations

from dataclasses import dataclass

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.registry import program
from guard.analysis.shell.words import Arg
from guard.effects import Effect, EffectKind

BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
MOVE = "*** Move to: "
EOF_MARKER = "*** End of File"
#: What Rust's ``str::trim`` removes (the Unicode White_Space property).
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)


class PatchError(ValueError):
    """The patch is not one Codex applies."""


@dataclass(frozen=True, slots=True)
class Hunk:
    """One file the patch touches: ``op`` is ``add``, ``delete`` or ``update``."""

    op: str
    path: str
    move_to: str | None = None


def _trim(text: str, exact: bool) -> str:
    return text if exact else text.strip(RUST_WHITESPACE)


def _lines(body: str, exact: bool) -> list[str]:
    text = body if exact else body.strip(RUST_WHITESPACE)
    if exact and text.endswith("\n"):
        text = text[:-1]
    lines = text.split("\n")
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _boundaries(lines: list[str], exact: bool) -> list[str]:
    def strict(ls: list[str]) -> list[str] | None:
        if len(ls) >= 2 and _trim(ls[0], exact) == BEGIN and _trim(ls[-1], exact) == END:
            return ls[1:-1]
        return None

    inner = strict(lines)
    if inner is not None:
        return inner
    if not exact and len(lines) >= 4 and lines[0] in ("<<EOF", "<<'EOF'", '<<"EOF"') \
            and lines[-1].endswith("EOF"):
        inner = strict(lines[1:-1])
        if inner is not None:
            return inner
    raise PatchError("the patch does not start with '*** Begin Patch' and end with"
                     " '*** End Patch'")


def _chunk(lines: list[str], first: bool) -> int:
    """How many lines the update chunk at the start of ``lines`` takes."""
    if lines[0] == "@@" or lines[0].startswith("@@ "):
        start = 1
    elif first:
        start = 0
    else:
        raise PatchError(f"an update chunk without its '@@' line: {lines[0]!r}")
    if start >= len(lines):
        raise PatchError("an update chunk without lines")
    parsed = 0
    for line in lines[start:]:
        if line == EOF_MARKER:
            if parsed == 0:
                raise PatchError("an update chunk without lines")
            parsed += 1
            break
        if line == "" or line[0] in " +-":
            parsed += 1
            continue
        if parsed == 0:
            raise PatchError(f"an unexpected line in an update chunk: {line!r}")
        break
    return parsed + start


def _hunk(lines: list[str], exact: bool) -> tuple[Hunk, int]:
    first = _trim(lines[0], exact)
    if first.startswith(ADD):
        taken = 1
        while taken < len(lines) and lines[taken].startswith("+"):
            taken += 1
        return Hunk("add", first[len(ADD):]), taken
    if first.startswith(DELETE):
        return Hunk("delete", first[len(DELETE):]), 1
    if first.startswith(UPDATE):
        path = first[len(UPDATE):]
        rest, taken = lines[1:], 1
        move = rest[0][len(MOVE):] if rest and rest[0].startswith(MOVE) else None
        if move is not None:
            rest, taken = rest[1:], taken + 1
        chunks = 0
        while rest:
            if _trim(rest[0], False) == "":
                rest, taken = rest[1:], taken + 1
                continue
            if rest[0].startswith("*"):
                break
            n = _chunk(rest, chunks == 0)
            chunks += 1
            rest, taken = rest[n:], taken + n
        if not chunks:
            raise PatchError(f"the update of {path!r} changes nothing")
        return Hunk("update", path, move), taken
    raise PatchError(f"{first!r} is not a hunk header")


def patch_hunks(body: str, *, exact: bool = False) -> list[Hunk]:
    """The files ``body`` touches as Codex reads it (``exact``: as the grammar is written,
    markers at column 0 and nothing trimmed). Raises :class:`PatchError`."""
    lines = _boundaries(_lines(body, exact), exact)
    hunks: list[Hunk] = []
    while lines:
        hunk, taken = _hunk(lines, exact)
        hunks.append(hunk)
        lines = lines[taken:]
    return hunks


def parse_patch(body: str) -> list[Effect]:
    """Effects of an apply_patch body: writes for Add/Update/Move to, deletes for Delete
    and for the file a move leaves; an unknown write for a patch Codex would refuse or
    that two readings read differently (see the module docstring)."""
    try:
        hunks = patch_hunks(body)
    except PatchError as exc:
        return [Effect.write(None, f"apply_patch: not a patch Codex applies ({exc})")]
    try:
        exact = patch_hunks(body, exact=True)
    except PatchError as exc:
        exact = []
        why = str(exc)
    else:
        why = "they find different files"
    if exact != hunks:
        return [Effect.write(None, "apply_patch: Codex trims what the patch grammar does not"
                                   f" (an indented or padded marker line), and the two readings"
                                   f" differ: {why}; write the markers at column 0")]
    effects: list[Effect] = []
    for h in hunks:
        if not h.path:
            effects.append(Effect.write(None, f"apply_patch: {h.op} without a path"))
        elif h.op == "add":
            effects.append(Effect.write(h.path, "apply_patch adds it"))
        elif h.op == "delete":
            effects.append(Effect.delete(h.path, "apply_patch deletes it"))
        else:
            effects.append(Effect.write(h.path, "apply_patch updates it"))
            if h.move_to is not None:
                if not h.move_to:
                    effects.append(Effect.write(None, "apply_patch: Move to without a path"))
                else:
                    effects.append(Effect.write(h.move_to, "apply_patch moves a file here"))
                    effects.append(Effect.delete(h.path, "apply_patch moves it away"))
    if not hunks:
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
