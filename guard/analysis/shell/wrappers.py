"""Wrappers: programs that run another command (sudo, env, timeout, xargs, command...).

Their options come from :mod:`guard.analysis.shell.tables.wrapper_options`; the command they
run is analysed like any other (through :meth:`Ctx.run`).
"""

from __future__ import annotations

import shlex

from guard.analysis.shell.context import Ctx, evaluates_code, is_dangerous_var
from guard.analysis.shell.option_parser import Parsed, Spec, could_be_option
from guard.analysis.shell.registry import ProgramHandler, program, register
from guard.analysis.shell.tables import wrapper_options as tables
from guard.analysis.shell.words import Arg


def _options(ctx: Ctx, name: str, spec: Spec, args: list[Arg], positional: int) -> Parsed | None:
    """Parse a wrapper's options and apply them; None (reported) when it is not analysable."""
    p = spec.parse(args)
    if p.error is not None:
        ctx.not_read_only(f"{name}: {p.error}; guard cannot tell what it runs")
        return None
    if any(could_be_option(a) for a in p.pos[: positional + 1]):
        ctx.not_read_only(f"{name} with a computed argument: it could be an option or any"
                          " program")
        return None
    for opt, written, vals in p.opts:
        if opt.role == "read":
            for v in vals[-1:]:
                ctx.read(v, f"{name} {opt.name} reads it")
        elif opt.role == "write":
            for v in vals or [Arg(None)]:
                ctx.write(v, f"{name} {written} writes it")
        elif opt.role in ("exec", "state"):
            ctx.not_read_only(f"{name} {written} runs a shell or changes state")
            return None
        elif opt.role == "cwd":
            ctx.chdir(vals[0] if vals else Arg(None))
    return p


def _wrapper(spec: Spec, positional: int) -> ProgramHandler:
    def handler(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
        p = _options(ctx, name, spec, args, positional)
        if p is None or len(p.pos) <= positional:
            return
        if name == "nohup":
            ctx.write("nohup.out", "nohup writes nohup.out when its output is a terminal")
        ctx.run(p.pos[positional:], heredoc)

    return handler


for _name, (_spec, _positional) in tables.WRAPPERS.items():
    if _name != "env":
        register(_wrapper(_spec, _positional), _name, wrapper=True)


@program("env", wrapper=True)
def _env(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    spec, _ = tables.WRAPPERS["env"]
    p = _options(ctx, name, spec, args, 0)
    if p is None:
        return
    rest = p.pos
    split = p.values("-S")
    if split:
        text = split[-1].text
        if text is None or any(c in text for c in "$\\#"):
            ctx.not_read_only("env -S with a string guard does not expand (variables, escapes)")
            return
        try:
            rest = [Arg(w) for w in shlex.split(text)] + rest
        except ValueError:
            ctx.not_read_only("env -S string cannot be split")
            return
    i = 0
    saved = ctx.tainted
    while i < len(rest):
        t = rest[i].text
        if t is None:
            break  # a computed command name: the walker reports it
        if "=" in t and not t.startswith("="):
            var = t.split("=", 1)[0]
            if evaluates_code(var):
                ctx.not_read_only(f"env sets {var}: bash evaluates its value as code at run"
                                  " time (prompts and set -x, new shells)")
            if is_dangerous_var(var):
                ctx.tainted = ctx.tainted or f"env sets {var}, which changes what programs do"
            i += 1
            continue
        break
    if i < len(rest):
        ctx.run(rest[i:], heredoc)
    ctx.tainted = saved


@program("command", "type", "which", "hash", wrapper=True)
def _command_builtin(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if name in ("type", "which"):
        return  # looks names up, runs nothing
    if name == "hash":
        if any(a.text is None or (a.text.startswith("-") and "p" in a.text) for a in args):
            ctx.tainted = ctx.tainted or "hash -p rebinds a program name"
            ctx.unknown_exec("hash -p rebinds a program name")
        return
    p = _options(ctx, name, tables.COMMAND, args, 0)
    if p is None or p.has("-v", "-V"):
        return  # command -v/-V looks a name up, runs nothing
    if p.pos:
        ctx.run(p.pos, heredoc)


@program("xargs", wrapper=True)
def _xargs(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = _options(ctx, name, tables.XARGS, args, 0)
    if p is None:
        return
    replace: str | None = None
    for opt, _, vals in p.opts:
        if "-I" in opt.names or "-i" in opt.names:
            replace = vals[0].text if vals else "{}"
            if replace is None:
                ctx.not_read_only("xargs -I with a computed replacement string")
                return
    inner = p.pos or [Arg("echo")]
    if replace is not None:
        ctx.run([Arg(None) if (a.text is not None and replace in a.text) else a
                 for a in inner], heredoc)
    else:
        ctx.run([*inner, Arg(None)], heredoc)
