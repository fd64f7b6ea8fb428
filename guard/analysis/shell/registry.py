"""The program registry: a program name -> the handler that turns its arguments into effects.

A name is registered once. Registering it again is a programming error and raises at
import time: a second registration used to override the first silently, so the
handler that ran was whichever module happened to be imported last.
"""

from __future__ import annotations

from collections.abc import Callable

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.words import Arg

ProgramHandler = Callable[[Ctx, str, list[Arg], "str | None"], None]

#: name -> handler; filled by the program modules when they are imported
PROGRAMS: dict[str, ProgramHandler] = {}
#: handlers that only run another command (sudo, env, ...): a taint is judged on the inner one
WRAPPERS: set[ProgramHandler] = set()


class DuplicateProgram(ValueError):
    """A program name registered twice."""


def register(handler: ProgramHandler, *names: str, wrapper: bool = False,
             table: dict[str, ProgramHandler] | None = None) -> ProgramHandler:
    """Register ``handler`` for ``names``; raises :class:`DuplicateProgram` on a taken name."""
    into = PROGRAMS if table is None else table
    for n in names:
        if n in into:
            raise DuplicateProgram(
                f"shell program {n!r} registered twice ({into[n].__qualname__} and"
                f" {handler.__qualname__}): remove one registration")
    for n in names:
        into[n] = handler
    if wrapper:
        WRAPPERS.add(handler)
    return handler


def program(*names: str, wrapper: bool = False) -> Callable[[ProgramHandler], ProgramHandler]:
    """Decorator: ``@program("cat", "tac")`` registers the handler for those names."""

    def decorate(fn: ProgramHandler) -> ProgramHandler:
        return register(fn, *names, wrapper=wrapper)

    return decorate
