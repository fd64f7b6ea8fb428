"""Input conventions shared by commands: JSON from an argument, ``@FILE`` or ``-``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from guard.effects import GuardError
from guard.plaintext import visible


def read_json_input(text: str, option: str = "--input") -> Any:
    """Parse ``text`` as JSON; ``@FILE`` reads it from FILE, ``-`` from standard input."""
    where = option
    if text == "-":
        text, where = sys.stdin.read(), f"{option} - (standard input)"
    elif text.startswith("@"):
        path = Path(text[1:])
        if not text[1:]:
            raise GuardError(f"{option} @: give a file name after @, e.g. {option} @call.json")
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise GuardError(f"{option} @{path}: cannot read it: no such file") from None
        except IsADirectoryError:
            raise GuardError(f"{option} @{path}: is a directory, not a JSON file") from None
        except UnicodeDecodeError:
            raise GuardError(f"{option} @{path}: not UTF-8 text") from None
        except OSError as exc:
            raise GuardError(f"{option} @{path}: cannot read it: {exc.strerror}") from None
        where = f"{option} @{path}"
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GuardError(
            f"{where} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno};"
            ' expected an object such as \'{"command": "ls"}\''
            + ("" if option != "--input" or where != option else "; @FILE reads it from a file")
        ) from None


def printable(text: str) -> str:
    """``text`` with control and invisible characters escaped, so one value never spans two
    lines (:func:`guard.plaintext.visible`, line feeds included)."""
    return visible(text, lines=False)


def control_chars(text: str) -> str | None:
    """A description of the first control character in ``text``, or None."""
    for c in text:
        if ord(c) < 0x20 or ord(c) == 0x7F:
            return {"\n": "a newline (\\n)", "\r": "a carriage return (\\r)",
                    "\t": "a tab (\\t)"}.get(c, f"a control character (\\x{ord(c):02x})")
    return None
