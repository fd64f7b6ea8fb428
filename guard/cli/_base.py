"""The command-line conventions that need neither typer nor rich.

Conventions every command follows (kept here so that no command re-implements them):

- ``-h``/``--help`` everywhere; ``guard -V``/``--version`` and shell completion
  (``guard --install-completion``) on guard itself.
- Colour: ``--color auto|always|never`` (accepted anywhere before ``--``) and ``NO_COLOR``;
  with colour off no escape sequence is written at all (bold and dim included).
- Errors: one line on stderr, ``guard: error: ...``; usage errors name the command's
  ``--help``. Exit 2 for bad input or usage. With ``--json`` (or ``--format json``) the
  error is a JSON object on stderr instead: ``{"schema_version": 1, "error": ...}``.
- JSON output carries ``"schema_version": 1`` (see docs/json.md).

Their typer side (typer's own help and errors, rich consoles) is in
:mod:`guard.cli._typer`; the entry point that reads a command line is
:mod:`guard.cli._main`. This module imports no other module of the command line.
"""

# Lazy imports: effects, policy, probe only on error/--version: run/check start fast.

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import IO, Any, NoReturn

SCHEMA_VERSION = 1


class ColorMode(StrEnum):
    auto = "auto"
    always = "always"
    never = "never"


class _State:
    color: ColorMode = ColorMode.auto
    json_mode = False


def color_mode() -> ColorMode:
    """The colour mode of this process (``--color``)."""
    return _State.color


def set_color_mode(mode: ColorMode) -> None:
    """Record the colour mode; :func:`guard.cli._typer.set_color` also tells typer."""
    _State.color = mode


def set_json_mode(on: bool) -> None:
    """Record whether this command line asked for JSON (warnings follow it)."""
    _State.json_mode = on


def color_enabled(stream: IO[str] | None = None) -> bool:
    """Whether to style output written to ``stream`` (stdout by default)."""
    if _State.color is ColorMode.never:
        return False
    if _State.color is ColorMode.always:
        return True
    if os.environ.get("NO_COLOR", ""):
        return False
    stream = sys.stdout if stream is None else stream
    return isatty(stream)


def isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def with_schema(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with ``schema_version`` first (every JSON object guard prints has one)."""
    return {"schema_version": SCHEMA_VERSION, **data}


def print_json(data: dict[str, Any], *, indent: int | None = None) -> None:
    """Print one JSON document (with ``schema_version``) on stdout."""
    sys.stdout.write(json.dumps(with_schema(data), indent=indent) + "\n")
    sys.stdout.flush()


def take_color(args: list[str]) -> tuple[list[str], ColorMode | None, str | None]:
    """Remove ``--color X`` / ``--color=X`` written before ``--``; (rest, mode, error)."""
    out: list[str] = []
    mode: ColorMode | None = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i:])
            break
        value: str | None = None
        if a == "--color":
            if i + 1 >= len(args):
                return args, None, "--color needs a value: auto, always or never"
            value, i = args[i + 1], i + 2
        elif a.startswith("--color="):
            value, i = a.split("=", 1)[1], i + 1
        else:
            out.append(a)
            i += 1
            continue
        try:
            mode = ColorMode(value)
        except ValueError:
            return args, None, f"--color {value!r}: use auto, always or never"
    return out, mode, None


def wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (``--json`` or ``--format json``)."""
    before = list(args[: args.index("--")] if "--" in args else args)
    for i, a in enumerate(before):
        if a == "--json" or a in ("--format=json", "-fjson"):
            return True
        if a in ("--format", "-f") and i + 1 < len(before) and before[i + 1] == "json":
            return True
    return False


def warn(message: str) -> None:
    """One warning on stderr (a JSON object with --json); never changes the exit code."""
    if _State.json_mode:
        sys.stderr.write(json.dumps(with_schema({"warning": message})) + "\n")
    else:
        sys.stderr.write(f"guard: warning: {message}\n")
    sys.stderr.flush()


def fail(message: str, *, as_json: bool, code: int = 2, **extra: Any) -> NoReturn:
    """Report an error the conventional way and leave with ``code``: the same code whatever
    the standard streams are (a caller that closed stderr gets no message, the status
    still says what happened)."""
    if as_json:
        text = json.dumps(with_schema({"error": message, **extra})) + "\n"
    else:  # every line carries the prefix (a policy error has one line per problem)
        text = "".join(f"guard: error: {line}\n" for line in message.splitlines())
    stream = sys.stderr  # None when the process started with descriptor 2 closed
    if stream is not None:
        try:
            stream.write(text)
            stream.flush()
        except (OSError, ValueError):  # closed since, or gone (EBADF, EPIPE): unsaid
            pass
    raise SystemExit(code)


def fail_for(exc: Exception, *, as_json: bool, code: int = 2) -> NoReturn:
    """Report an error raised by a command (not a usage error) the conventional way;
    leave with ``code``."""
    from guard.effects import GuardError
    from guard.policy import PolicyError

    if isinstance(exc, PolicyError):
        fail(str(exc), as_json=as_json, code=code, problems=exc.problems)
    if isinstance(exc, GuardError):  # a command that cannot start: 127/126, as shells say
        own = getattr(exc, "exit_code", None)
        fail(str(exc), as_json=as_json, code=own if isinstance(own, int) else code)
    if isinstance(exc, OSError):  # a full disk, a read-only file system, a permission
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}", as_json=as_json, code=code)
    # a bug: still one line, never a traceback (GUARD_DEBUG=1 shows it)
    if os.environ.get("GUARD_DEBUG"):
        raise exc
    fail(
        f"internal error: {type(exc).__name__}: {exc} (run again with GUARD_DEBUG=1 for"
        " the traceback, and please report it)",
        as_json=as_json,
        code=code,
    )


def installed_version(unknown: str = "unknown") -> str:
    """guard's version as installed (the package's metadata); ``unknown`` when it is not."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openoxide-guard")
    except PackageNotFoundError:  # pragma: no cover - run from a bare source tree
        return unknown


def version_text() -> str:
    """What ``guard --version`` prints: the version, which installation runs, the Python
    and the layers available here (:mod:`guard.probe`, which doctor and review read too)."""
    from guard.probe import version_text

    return version_text()


def read_options(
    args: list[str], valued: dict[str, str], flags: dict[str, str]
) -> tuple[dict[str, Any], list[str]] | None:
    """(options, positionals) of a plain command line, or None (typer says the rest).

    Plain: each option spelt out (``--name VALUE``, ``--name=VALUE``, ``-a VALUE``) with
    a value that is not empty and does not start with ``-``; no ``--``; positionals that
    do not start with ``-``. Options and positionals may be interleaved, as typer allows.
    """
    values: dict[str, Any] = {}
    positionals: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        i += 1
        if not a.startswith("-"):
            positionals.append(a)
            continue
        if a in flags:
            values[flags[a]] = True
            continue
        name, eq, value = a.partition("=") if a.startswith("--") else (a, "", "")
        key = valued.get(name)
        if key is None or key in values:  # unknown, `-`, `--`, or given twice
            return None
        if not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if not value or value.startswith("-"):
            return None
        values[key] = value
    return values, positionals


_STANDARD = ((0, "stdin", os.O_RDONLY), (1, "stdout", os.O_WRONLY), (2, "stderr", os.O_WRONLY))


def hold_standard_streams() -> None:
    """Hold each of stdin, stdout and stderr the caller closed (``guard run -- CMD >&- 2>&-``,
    ``guard confine -- CMD >&- 2>&-``) on /dev/null, before guard opens anything.

    Otherwise the first pipes and files guard opens (the helper's pipes, the monitor's
    descriptors, the audit log) take those numbers: the command would inherit them as its
    own stdout and stderr and write into them, and guard's messages would go there too.
    The command gets /dev/null where its caller gave it nothing; Python's stream for a
    closed descriptor (None) becomes one on /dev/null, so guard's messages are dropped
    rather than failing the run."""
    for fd, name, flags in _STANDARD:
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        held = os.open(os.devnull, flags)  # the lowest free number: ``fd`` itself
        if held != fd:
            os.dup2(held, fd)
            os.close(held)
        os.set_inheritable(fd, True)  # the command's, as a stream its caller gave it
        if getattr(sys, name) is None:
            stream = open(  # noqa: SIM115 (the process's stream, never closed)
                fd, "r" if fd == 0 else "w", encoding="utf-8", errors="backslashreplace",
                closefd=False,
            )  # fmt: skip
            setattr(sys, name, stream)


def a_directory(value: Path | None) -> Path | None:
    """The check every -C/--cwd gets: an existing directory, else one line of bad input."""
    if value is not None and not value.is_dir():
        from guard.effects import GuardError

        raise GuardError(f"--cwd {value}: not a directory")
    return value


def a_worktree(value: Path | None) -> Path | None:
    """The check every -w/--worktree gets: an existing directory."""
    if value is not None and not value.is_dir():
        from guard.effects import GuardError

        raise GuardError(f"--worktree {value}: not a directory")
    return value


def enter(cwd: Path | None) -> None:
    """-C DIR for a command that works from the current directory: go to DIR first."""
    if cwd is not None:
        a_directory(cwd)
        os.chdir(cwd)
