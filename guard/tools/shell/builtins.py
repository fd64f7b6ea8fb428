"""Bash builtins and interpreters: nested shells, eval, source, cd, variables."""

from __future__ import annotations

import re
import shutil

from guard.effects import Effect
from guard.tools.shell.context import Ctx
from guard.tools.shell.options import parse_opts
from guard.tools.shell.registry import program
from guard.tools.shell.words import Arg

_SHELLS = ("bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox_sh", "rbash")


@program(*_SHELLS)
def _shell(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    script: Arg | None = None
    i = 0
    while i < len(args):
        t = args[i].text
        if t is None:
            break
        if t == "--":
            i += 1
            break
        if t.startswith("-") and len(t) > 1 and not t.startswith("--"):
            if "c" in t[1:]:
                if "o" in t[1:] or "O" in t[1:]:
                    break  # -o option name: too clever, treat as unknown
                script = args[i + 1] if i + 1 < len(args) else Arg(None)
                break
            if any(c in t for c in "oO"):
                i += 2
                continue
            i += 1
            continue
        if t.startswith("+"):
            i += 1
            continue
        if t.startswith("--"):
            if t in ("--norc", "--noprofile", "--posix", "--login", "--noediting",
                     "--restricted", "--verbose"):
                i += 1
                continue
            break
        break
    if script is not None:
        if script.text is None:
            ctx.unknown_exec(f"{name} -c with a computed script")
            ctx.unknown_write(f"{name} -c with a computed script")
            return
        ctx.nested(script.text, f"{name} -c")
        return
    if i >= len(args):
        if heredoc is not None:
            ctx.nested(heredoc, f"{name} reading a heredoc")
            return
        ctx.unknown_exec(f"{name} reads commands from standard input")
        ctx.unknown_write(f"{name} reads commands from standard input")
        return
    target = args[i]
    ctx.read(target, f"{name} runs this script")
    _source_file(ctx, target, name)


@program("eval")
def _eval(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if any(a.literal is None and a.text is None for a in args):
        ctx.unknown_exec("eval of a computed string")
        ctx.unknown_write("eval of a computed string")
        return
    ctx.nested(" ".join(a.text or "" for a in args), "eval")


@program("source", ".")
def _source(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if not args:
        ctx.unknown_write(f"{name} without a file")
        return
    ctx.read(args[0], f"{name} runs this file in the current shell")
    _source_file(ctx, args[0], name)
    ctx.tainted = ctx.tainted or f"{name} may redefine programs and variables"


def _source_file(ctx: Ctx, target: Arg, name: str) -> None:
    """A script file's contents are not trusted to stay what they are: unknown effects."""
    ctx.unknown_exec(f"{name} runs a script file whose commands are not analysed")
    ctx.unknown_write(f"{name} runs a script file that may change anything")


_INTERPRETERS = ("python", "python2", "python3", "node", "nodejs", "perl", "ruby", "php", "lua",
                 "awk", "gawk", "mawk", "nawk", "Rscript", "tclsh", "osascript", "pwsh",
                 "powershell", "fish", "csh", "tcsh", "expect", "julia", "ts-node", "tsx",
                 "irb", "ipython", "sqlite3", "psql", "mysql", "vim", "vi", "nvim", "emacs",
                 "nano", "ed", "ex", "less", "more", "man", "watch", "script", "flock", "parallel",
                 "trap", "alias", "unalias", "enable", "set", "shopt", "kill", "pkill", "killall",
                 "chroot", "nsenter", "unshare", "su", "runuser", "strace", "ltrace", "gdb",
                 "busybox", "open", "xdg-open", "tar", "zip", "unzip", "gzip", "gunzip", "bzip2",
                 "xz", "unxz", "zstd", "7z", "cpio", "split", "csplit", "ar", "date", "hostname",
                 "ip", "ifconfig", "iptables", "sysctl", "modprobe", "insmod", "reboot",
                 "shutdown", "halt", "poweroff", "useradd", "usermod", "passwd", "visudo")


@program(*_INTERPRETERS)
def _interpreter(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if name in ("perl",):
        p = parse_opts(args, "eEiIlmMx0", ())
        in_place = any(o == "-i" for o, _ in p.opts)
        if in_place:
            files = p.pos if p.has("-e", "-E") else p.pos[1:]
            for f in files:
                ctx.write(f, "perl -i edits it in place")
            if not files:
                ctx.unknown_write("perl -i without a literal file")
    if name == "date" and not any((a.text or "-s").startswith(("-s", "--set")) for a in args):
        return
    if name == "hostname" and not [a for a in args if not (a.text or "x").startswith("-")]:
        return
    if name == "set" and all(a.text in ("-e", "-u", "-x", "+x", "+e", "-eu", "-ex", "-eux",
                                         "-euo", "pipefail", "-o", "-ux", "-xe") for a in args):
        return  # shell options that change no program's meaning
    what = "runs code guard does not analyse" if name not in ("tar", "zip", "unzip", "gzip",
                                                                  "gunzip", "bzip2", "xz",
                                                                  "unxz", "zstd", "7z", "cpio",
                                                                  "split", "csplit", "ar") else \
        "writes files guard cannot name"
    found = shutil.which(name)
    if found is not None:
        ctx.add(Effect.exec(found, f"{name}: {what}"))
    ctx.unknown_exec(f"{name}: {what}")
    if what.startswith("writes") or name in ("trap", "alias", "enable", "shopt"):
        ctx.unknown_write(f"{name}: {what}")
    if name in ("alias", "enable", "shopt", "set", "trap"):
        ctx.tainted = ctx.tainted or f"{name} changes how later commands run"


@program("cd", "pushd", "popd", wrapper=True)
def _cd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    rest = [a for a in args if not (a.text or "").startswith("-") or a.text == "-"]
    if name == "popd" or (name == "pushd" and not rest):
        ctx.chdir(Arg(None))
        return
    ctx.chdir(rest[0] if rest else None)


@program("export", "readonly", "declare", "typeset", "local", "unset", wrapper=True)
def _export_cmd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    for a in args:
        if a.text is None:
            ctx.tainted = ctx.tainted or f"{name} with a computed name"
            ctx.unknown_exec(f"{name} with a computed argument")
        elif not a.text.startswith("-"):
            ctx.taint_if_dangerous(a.text.split("=", 1)[0])


@program("read", "mapfile", "readarray")
def _read_builtin(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """read/mapfile assign variables; a subscripted name or -C callback evaluates code."""
    p = parse_opts(args, "adinNptuCcs", ())
    if p.has("-C"):
        ctx.unknown_exec(f"{name} -C runs a callback")
    for a in [*p.pos, *p.values("-a")]:
        if a.text is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a.text):
            ctx.unknown_exec(f"{name} into {a.text or 'a computed name'}: subscripts are evaluated")
        else:
            ctx.taint_if_dangerous(a.text)


@program("let")
def _let(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    ctx.unknown_exec("let evaluates arithmetic, which can run commands hidden in variables")



@program("printf")
def _printf(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "v")
    for v in p.values("-v"):
        if v.text is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v.text):
            ctx.unknown_exec("printf -v with an array subscript evaluates it")
        else:
            ctx.taint_if_dangerous(v.text)

