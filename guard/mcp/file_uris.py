"""Paths and file URIs as MCP servers read them: every reading is decided, or refused.

The policy decides on a path; the server opens one. When the two could differ,
guard decides on each path the server might open (a call is allowed only if
all are), or refuses the call:

* **file URIs** (``resources/read``, a tool argument): servers turn them into paths
  with different parsers. Node's ``fileURLToPath`` and the WHATWG parser behind it
  (pydantic's ``AnyUrl`` too) take ``\\`` for ``/`` and resolve ``..`` and ``%2e%2e``
  before anything else, drop ``?`` and ``#``, strip tabs and newlines, and treat
  ``C:`` or ``C|`` as a drive; Python's ``urllib`` and Go's ``net/url`` keep all of that
  as written. :func:`file_uri_path` therefore reads only the one form every parser
  reads alike: ``file://`` (or ``file://localhost``), an absolute path of plain
  segments, percent escapes only for bytes that are not ``/``, ``\\``, NUL or control
  characters, and valid UTF-8 once decoded. Anything else is refused with the form
  to use instead.
* **``..`` after a symlink** (a tool's path argument): Node's ``path.resolve`` and Go's
  ``filepath.Clean`` remove ``dir/..`` as text, the kernel goes up from where ``dir``
  leads. Both paths are decided.
* **a leading ``~``**: the filesystem server expands ``~`` and ``~/``, a Python or Go
  server opens a directory named ``~``; guard decides on both (and on ``~user`` read
  literally).
* **Unicode look-alikes**: the filesystem server opens an existing name that equals a
  missing one under NFC normalisation (``resolveUnicodeEquivalentPath``); guard decides
  on that name too.
* **a file URI given to a tool guard does not know**: decided as a read and a write of
  its path (what a tool may do with a file it is given).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any

from guard.effects import PATH_KINDS, Effect, EffectKind, GuardError

#: a file URI to some parser: C0 controls and spaces before it are stripped, and tabs and
#: line ends anywhere removed, by WHATWG parsers and Python's ``urlsplit`` alike
_SCHEME = re.compile(r"[\x00-\x20]*file:", re.IGNORECASE)
_REMOVED = str.maketrans("", "", "\t\n\r")
_AUTHORITY = re.compile(r"file://(localhost)?(?=/)", re.IGNORECASE)
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
_DRIVE = re.compile(r"[A-Za-z][:|]")
#: bytes a percent escape may not stand for: "/", "\", NUL and the other controls, DEL
_FORBIDDEN_BYTES = frozenset([0x2F, 0x5C, 0x7F, *range(0x20)])

FORM = "write it as file:///absolute/path (plain segments; no \\, ., .., ? or #)"


def is_file_uri(text: str) -> bool:
    """Whether ``text`` names a file as a URI (``file:`` in any case)."""
    return _SCHEME.match(text.translate(_REMOVED)) is not None


def file_uri_path(uri: str) -> str:
    """The absolute path a ``file:`` URI names, read the one way every parser reads it.

    Raises :class:`GuardError` naming what could be read differently.
    """

    def refuse(why: str) -> GuardError:
        return GuardError(f"file URI {uri!r}: {why}; {FORM}")

    if uri != uri.strip() or any(ord(c) < 0x20 or c == "\x7f" for c in uri):
        raise refuse("it holds a control character or starts or ends with a space")
    if "\\" in uri:
        raise refuse("a backslash is a slash to some parsers (WHATWG, Node) and a letter to others")
    if "?" in uri or "#" in uri:
        raise refuse("some parsers drop a query or fragment, others keep it in the path")
    authority = _AUTHORITY.match(uri)
    if authority is None:
        rest = uri[5:] if is_file_uri(uri) else uri
        if rest.startswith("//"):
            host = rest[2:].split("/", 1)[0]
            raise refuse(f"it names the remote host {host!r}; only a local file can be decided")
        raise refuse("it is not of the form file:///path")
    path = uri[authority.end():]
    segments = path.split("/")[1:]
    if segments and segments[-1] == "":
        segments.pop()  # one trailing slash: a directory
    out: list[str] = []
    for i, raw in enumerate(segments):
        if raw == "":
            raise refuse("an empty segment (//) is the root to some readers")
        if "%" in raw and _ESCAPE.sub("", raw).count("%"):
            raise refuse("a % that is not followed by two hex digits")
        data = _ESCAPE.sub(lambda m: f"\0{m.group(1)}", raw)
        decoded = bytearray()
        for j, piece in enumerate(data.split("\0")):
            if j:
                byte = int(piece[:2], 16)
                if byte in _FORBIDDEN_BYTES:
                    raise refuse(f"%{piece[:2]} decodes to {chr(byte)!r}, read differently")
                decoded.append(byte)
                piece = piece[2:]
            decoded.extend(piece.encode("utf-8"))
        try:
            name = decoded.decode("utf-8")
        except UnicodeDecodeError:
            raise refuse("its escapes do not decode to UTF-8") from None
        if name in (".", ".."):
            raise refuse(f"a {name!r} segment is resolved by some parsers and not by others")
        if i == 0 and _DRIVE.fullmatch(name):
            raise refuse(f"{name!r} first is a Windows drive to WHATWG parsers")
        out.append(name)
    return "/" + "/".join(out)


def readings(effects: list[Effect], cwd: str, *, guessed: bool, arguments: Any) -> list[Effect]:
    """``effects`` with every other path a server may open for them (see the module
    docstring) added after each one. Raises :class:`GuardError` for a file URI that
    parsers could read differently."""
    out: list[Effect] = []
    for e in effects:
        out.append(e)
        if e.kind not in PATH_KINDS or e.kind is EffectKind.EXEC or not e.target:
            continue
        out.extend(_other_readings(e, cwd))
    if guessed:
        for uri in _file_uris(arguments):
            path = file_uri_path(uri)
            what = f"a file URI in the arguments of a tool guard does not know: {uri}"
            out += [Effect.read(path, what), Effect.write(path, what)]
    return out


def _other_readings(e: Effect, cwd: str) -> Iterable[Effect]:
    target = e.target
    assert target is not None

    def another(path: str, why: str) -> Effect:
        return Effect(e.kind, path, f"{e.detail}; {why}", e.creates_dir, e.creates)

    if is_file_uri(target):
        yield another(file_uri_path(target), "as a server that takes file URIs reads it")
    if target.startswith("~"):
        yield another(os.path.join(".", target), "as a server that does not expand ~ reads it")
    full = os.path.join(cwd, os.path.expanduser(target))
    if ".." in full.split("/"):
        yield another(os.path.normpath(full), "with .. removed before symlinks are followed")
    if not target.isascii():
        equivalent = unicode_equivalent(os.path.normpath(full))
        if equivalent is not None:
            yield another(equivalent, "the existing name the filesystem server matches by NFC")


def unicode_equivalent(path: str) -> str | None:
    """The existing path the filesystem server opens for a missing absolute ``path`` whose
    names equal existing ones under NFC, or None (it exists, or has no such twin).
    Raises :class:`GuardError` when a name has two twins (the server refuses it too)."""
    if os.path.lexists(path):
        return None
    parts = [p for p in path.split("/") if p]
    current = "/"
    changed = False
    for i, part in enumerate(parts):
        candidate = os.path.join(current, part)
        if os.path.lexists(candidate):
            current = candidate
            continue
        want = unicodedata.normalize("NFC", part)
        try:
            names = os.listdir(current)
        except OSError:
            break
        twins = [n for n in names if unicodedata.normalize("NFC", n) == want]
        if len(twins) > 1:
            raise GuardError(f"{path!r}: {part!r} matches {len(twins)} names under NFC")
        if not twins:
            current = os.path.join(current, *parts[i:])
            break
        current = os.path.join(current, twins[0])
        changed = True
    return current if changed else None


def _file_uris(value: Any) -> Iterable[str]:
    """Every string in ``value``, nested objects and arrays included, that is a file URI."""
    todo = [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            if is_file_uri(item):
                yield item
        elif isinstance(item, Mapping):
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
