"""The entry point: reads ``guard``'s command line and hands it to the one module that runs it.

:func:`main` starts a confined command (``guard run``) without importing typer, rich or
any other command's module (:mod:`guard.cli.run_plain`), and answers ``--version`` and a
plain ``guard check`` or ``guard lint`` the same way (:mod:`guard.cli.quick`); ``guard
--help`` (:mod:`guard.cli.root_help`), ``guard explain`` (:mod:`guard.cli.explain_view`),
``guard mode`` and ``guard plan status`` (:mod:`guard.cli.plan_view`) print without typer
what typer's commands print; TAB completion is answered before this (:func:`guard.cli.main`,
:mod:`guard.cli.completion`). Every other command line goes through the typer application
(:func:`dispatch`, :mod:`guard.cli._app`), loaded only then. The conventions it applies are in
:mod:`guard.cli._base`; the commands themselves are not here.
"""

# Lazy imports: quick, runner, typer, commands per command line: run/check start fast.

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Sequence

from guard.cli._base import (
    ColorMode,
    color_mode,
    fail,
    fail_for,
    set_color_mode,
    set_json_mode,
    take_color,
    version_text,
    wants_json,
)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import NoReturn


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: never lets a traceback reach the user."""
    if "_GUARD_COMPLETE" in os.environ:  # a TAB (guard.cli.main answers it before this)
        from guard.cli import completion

        completion.run()
    args = list(sys.argv[1:] if argv is None else argv)
    args, mode, problem = take_color(args)
    if args[:1] != ["run"]:
        gc.enable()  # off for start-up (guard.cli.main); guard run's is on once its policy is
    as_json = wants_json(args)
    set_json_mode(as_json)
    if problem is not None:
        fail(problem, as_json=as_json)
    set_color_mode(mode or ColorMode.auto)
    if args in (["--version"], ["-V"]):
        sys.stdout.write(version_text())
        raise SystemExit(0)
    if args in (["--help"], ["-h"]) and "_GUARD_COMPLETE" not in os.environ:
        from guard.cli import root_help

        if root_help.render():  # typer's layout, without typer
            raise SystemExit(0)
    if args[:1] in (["check"], ["lint"]):  # called once per file by hooks and editors
        _quick(args, as_json=as_json)
    if args[:2] == ["confine", "--"] and len(args) > 2:  # the model's confined form
        from guard.cli import confine_command

        try:
            code = confine_command.execute(args[2:])
        except Exception as exc:
            fail_for(exc, as_json=as_json, code=confine_command.NOT_STARTED)
        raise SystemExit(code)
    if args[:1] == ["doctor"]:  # the first thing to run when something is off
        _doctor(args[1:], as_json=as_json)
    if args[:1] == ["explain"]:  # a policy author's "why?"
        _explain(args[1:], as_json=as_json)
    if args[:1] == ["mode"] or args[:2] == ["plan", "status"]:  # a prompt's status line
        _view(args, as_json=as_json)
    if args[:1] == ["run"]:  # the start-up cost of every confined command
        from guard.cli import run_plain

        options = run_plain.parse(args[1:])
        if options is None:
            gc.enable()
        if options is not None:
            try:
                code = run_plain.execute(options)
            except KeyboardInterrupt:  # Ctrl-C: quietly, as on typer's path
                raise SystemExit(130) from None
            except EOFError:  # as on typer's path
                sys.stderr.write("\n")
                fail("aborted", as_json=as_json, code=130)
            except Exception as exc:
                fail_for(exc, as_json=as_json)
            finally:
                gc.enable()  # on already once the policy loaded; for a run that stopped before
            if argv is None:
                _leave(code)
            raise SystemExit(code)
        # help, a usage error, --explain: the typer command says it (the same command)
    dispatch(args, as_json=as_json)


def _leave(code: int) -> NoReturn:
    """Exit ``guard run`` once its command is done, without the interpreter's teardown
    (every module's objects freed one by one: milliseconds the user waits for). Nothing is
    left to do: the command was waited for, the monitor stopped (its final reconciliation
    run, its records written, its threads joined or named as stuck), the egress proxy
    closed, the private TMPDIR removed, and guard writes its files (audit records
    included) unbuffered."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: started without that descriptor
                stream.flush()
        except (OSError, ValueError):
            code = code or 1
    os._exit(code)


def _quick(args: list[str], *, as_json: bool) -> None:
    """Answer a plain ``guard check`` or ``guard lint`` without typer (see
    :mod:`guard.cli.quick`); return for anything else, which typer then reads."""
    from guard.cli import quick

    check = quick.parse_check(args[1:]) if args[0] == "check" else None
    lint = quick.parse_lint(args[1:]) if args[0] == "lint" else None
    if check is None and lint is None:
        return
    try:
        if check is not None:
            code = quick.run_check(check)
        elif lint is not None:
            code = quick.run_lint(lint)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        fail_for(exc, as_json=as_json)
    raise SystemExit(code)


def _doctor(args: list[str], *, as_json: bool) -> None:
    """Answer ``guard doctor [--json]`` without typer (:mod:`guard.cli.doctor_view`)."""
    from guard.cli import doctor_view

    asked = doctor_view.parse_doctor(args)
    if asked is None:
        return
    try:
        code = doctor_view.run_doctor(asked)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        fail_for(exc, as_json=as_json)
    raise SystemExit(code)


def _explain(args: list[str], *, as_json: bool) -> None:
    """Answer a plain ``guard explain`` without typer (:mod:`guard.cli.explain_view`)."""
    from guard.cli import explain_view

    options = explain_view.parse_explain(args)
    if options is None:
        return
    try:
        code = explain_view.run_explain(options)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        fail_for(exc, as_json=as_json)
    raise SystemExit(code)


def _view(args: list[str], *, as_json: bool) -> None:
    """Answer ``guard mode`` (printing) or ``guard plan status`` without typer (see
    :mod:`guard.cli.plan_view`); return for any other command line, which typer reads."""
    from guard.cli import plan_view

    try:
        if args[0] == "mode":
            mode = plan_view.parse_mode(args[1:])
            if mode is None:
                return
            plan_view.show_mode(*mode)
        else:
            status = plan_view.parse_status(args[2:])
            if status is None:
                return
            plan_view.show_status(*status)
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except Exception as exc:
        fail_for(exc, as_json=as_json)
    raise SystemExit(0)


def _completed_words() -> list[str]:
    """The words before the one being completed (typer's scripts pass COMP_WORDS and
    COMP_CWORD), the program name dropped: the command they name decides the family."""
    words = os.environ.get("COMP_WORDS", "").split()
    try:
        cword = int(os.environ.get("COMP_CWORD", "0"))
    except ValueError:
        cword = 0
    return words[1:cword]


def dispatch(args: list[str], *, as_json: bool) -> NoReturn:
    """Run the command line ``args`` (``--color`` already taken) through typer; exit."""
    from guard.cli._typer import run_typer, set_color

    set_color(color_mode())  # typer's own help and errors follow it too
    if args[:1] == ["run"]:  # the one command: see guard.cli.run_plain
        from guard.cli.run import run_app

        run_typer(run_app, args[1:], prog="guard run", as_json=as_json)
    from guard.cli._families import app_for, help_app

    completing = "_GUARD_COMPLETE" in os.environ  # a TAB: the words are in the environment
    if args in ([], ["--help"], ["-h"]) and not completing:  # the command list: no family
        run_typer(help_app(), args, prog="guard", as_json=as_json)
    # the family of the command named: its imports alone
    only = app_for(_completed_words() if completing else args)
    if only is not None:
        run_typer(only, args, prog="guard", as_json=as_json)
    from guard.cli._app import app  # every command family, registered on it

    run_typer(app, args, prog="guard", as_json=as_json)
