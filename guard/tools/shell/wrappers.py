"""Wrappers: programs that run another command (sudo, env, timeout, xargs, command...)."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from guard.tools.shell.context import Ctx, is_dangerous_var
from guard.tools.shell.registry import ProgramHandler, program, register
from guard.tools.shell.words import Arg


def _unwrap(ctx: Ctx, rest: list[Arg], heredoc: str | None, why: str) -> None:
    if not rest:
        return
    ctx.run(rest, heredoc)


@program("env", wrapper=True)
def _env(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    i = 0
    while i < len(args):
        t = args[i].text
        if t is None:
            ctx.unknown_exec("env with a computed argument")
            ctx.unknown_write("env with a computed argument")
            return
        if t in ("-u", "--unset", "-C", "--chdir") and i + 1 < len(args):
            if t in ("-C", "--chdir"):
                ctx.chdir(args[i + 1])
            i += 2
            continue
        if t in ("-S", "--split-string") or t.startswith(("-S", "--split-string=")):
            s = args[i + 1] if t in ("-S", "--split-string") and i + 1 < len(args) else Arg(
                t.split("=", 1)[1] if "=" in t else t[2:])
            if s.text is None:
                ctx.unknown_exec("env -S with a computed string")
                return
            try:
                words = [Arg(w) for w in shlex.split(s.text)] + args[i + 2 :]
            except ValueError:
                ctx.unknown_write("env -S string cannot be split")
                return
            ctx.run(words, heredoc)
            return
        if t.startswith("-"):
            i += 1
            continue
        if "=" in t and not t.startswith("="):
            var = t.split("=", 1)[0]
            if is_dangerous_var(var):
                saved = ctx.tainted
                ctx.tainted = ctx.tainted or f"env sets {var}, which changes what programs do"
                ctx.run(args[i + 1 :], heredoc) if i + 1 < len(args) else None
                ctx.tainted = saved
                return
            i += 1
            continue
        break
    _unwrap(ctx, args[i:], heredoc, "env")


def _skip_opts_then_run(short_value: str, long_value: Iterable[str] = (), positional: int = 0,
                        bad: Iterable[str] = ()) -> ProgramHandler:
    bad_set = set(bad)

    def handler(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
        long_set = set(long_value)
        i = 0
        while i < len(args):
            t = args[i].text
            if t is None:
                ctx.unknown_exec(f"{name} with a computed argument")
                ctx.unknown_write(f"{name} with a computed argument")
                return
            if t == "--":
                i += 1
                break
            if not t.startswith("-") or t == "-":
                break
            if t in bad_set or (t[:2] in bad_set and not t.startswith("--")):
                ctx.unknown_exec(f"{name} {t} starts a shell or runs something else")
                ctx.unknown_write(f"{name} {t} starts a shell or runs something else")
                return
            if t.startswith("--"):
                i += 2 if (t in long_set and "=" not in t) else 1
                continue
            last = t[-1]
            i += 2 if (last in short_value and len(t) == 2) else 1
        i += positional
        if i > len(args):
            return
        _unwrap(ctx, args[i:], heredoc, name)

    return handler


for _w, _h in (
    ("sudo", _skip_opts_then_run("ugpCDhrtUTR", ("--user", "--group", "--prompt", "--chdir",
                                                "--host", "--role", "--type", "--other-user",
                                                "--close-from", "--command-timeout"),
                                 bad=("-s", "--shell", "-i", "--login", "-e", "--edit", "-l",
                                      "--list", "-v", "-K", "-k"))),
    ("doas", _skip_opts_then_run("uC", bad=("-s",))),
    ("nice", _skip_opts_then_run("n", ("--adjustment",))),
    ("ionice", _skip_opts_then_run("cnpP", ("--class", "--classdata", "--pid", "--pgid"))),
    ("nohup", _skip_opts_then_run("")),
    ("setsid", _skip_opts_then_run("")),
    ("timeout", _skip_opts_then_run("sk", ("--signal", "--kill-after"), positional=1)),
    ("time", _skip_opts_then_run("fo", ("--format", "--output"), bad=("-o", "--output"))),
    ("builtin", _skip_opts_then_run("")),
    ("exec", _skip_opts_then_run("a", bad=())),
    ("stdbuf", _skip_opts_then_run("ioe", ("--input", "--output", "--error"))),
    ("chronic", _skip_opts_then_run("")),
    ("coproc", _skip_opts_then_run("")),
    ("unbuffer", _skip_opts_then_run("")),
):
    register(_h, _w, wrapper=True)


@program("command", "type", "which", "hash", wrapper=True)
def _command_builtin(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    texts = [a.text for a in args]
    if name in ("type", "which") or any(t in ("-v", "-V") for t in texts):
        return  # looks a name up, runs nothing
    if name == "hash":
        if any(t in ("-p",) for t in texts):
            ctx.tainted = ctx.tainted or "hash -p rebinds a program name"
            ctx.unknown_exec("hash -p rebinds a program name")
        return
    i = 0
    while i < len(args) and args[i].text in ("-p", "--"):
        i += 1
    if i < len(args):
        ctx.run(args[i:], heredoc)


@program("xargs", wrapper=True)
def _xargs(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    replace: str | None = None
    i = 0
    while i < len(args):
        t = args[i].text
        if t is None:
            ctx.unknown_exec("xargs with a computed argument")
            ctx.unknown_write("xargs with a computed argument")
            return
        if t == "--":
            i += 1
            break
        if not t.startswith("-"):
            break
        if t in ("-I", "-i") or t.startswith(("-I", "--replace")):
            if t == "-I" and i + 1 < len(args):
                replace = args[i + 1].text or "{}"
                i += 2
                continue
            replace = t[2:] if t.startswith("-I") and len(t) > 2 else "{}"
            i += 1
            continue
        if t in ("-a", "--arg-file") and i + 1 < len(args):
            ctx.read(args[i + 1], "xargs reads arguments from it")
            i += 2
            continue
        if t in ("-n", "-L", "-P", "-s", "-d", "-E", "-e", "--max-args", "--max-lines",
                 "--max-procs", "--max-chars", "--delimiter", "--eof", "--process-slot-var"):
            i += 2
            continue
        i += 1
    inner = args[i:] or [Arg("echo")]
    if replace is not None:
        inner = [Arg(None) if (a.text is not None and replace in a.text) else a for a in inner]
        ctx.run(inner, heredoc)
    else:
        ctx.run([*inner, Arg(None)], heredoc)

