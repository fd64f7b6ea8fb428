"""Bash builtins and interpreters: nested shells, eval, source, cd, variables."""

from __future__ import annotations

import re
import shutil

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.evaluation import check_assignment_word, check_name
from guard.analysis.shell.option_parser import Spec, parse_opts
from guard.analysis.shell.registry import program
from guard.analysis.shell.words import Arg
from guard.effects import Effect

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
                 "xz", "unxz", "zstd", "7z", "cpio", "split", "csplit", "ar",
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


@program("export", "readonly", "declare", "typeset", "local", wrapper=True)
def _export_cmd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """Reached as ``builtin declare ...`` or ``command export ...`` (the grammar parses the
    plain forms itself; the walker checks those)."""
    for a in args:
        text = a.literal
        if text is not None and text.startswith(("-", "+")) and len(text) > 1:
            if set(text[1:]) & {"i", "n"}:
                ctx.unknown_exec(f"{name} {text}: integer and nameref variables evaluate"
                                 " their values")
        else:
            check_assignment_word(ctx, text, name)


@program("unset", wrapper=True)
def _unset_cmd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    for a in args:
        if a.literal is not None and a.literal.startswith("-"):
            continue
        check_name(ctx, a.literal, "unset")


_READ = Spec("ers", "-a= -d= -i= -n= -N= -p= -t= -u=", permute=False)
_MAPFILE = Spec("t", "-d= -n= -O= -s= -u= -C= -c=", permute=False)


@program("read", "mapfile", "readarray")
def _read_builtin(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """read/mapfile assign variables: a subscripted name is evaluated; -C runs a callback."""
    spec = _READ if name == "read" else _MAPFILE
    p = spec.parse(args)
    if p.error is not None:
        ctx.unknown_exec(f"{name}: {p.error}")
        return
    if p.has("-C"):
        ctx.unknown_exec(f"{name} -C runs a callback")
    for a in [*p.pos, *p.values("-a")]:
        check_name(ctx, a.literal, f"{name} into")
    if name != "read" and p.values("-O"):
        for v in p.values("-O"):
            if v.literal is None or not v.literal.isdigit():
                ctx.unknown_exec(f"{name} -O {v.text or '<computed>'} is evaluated")


@program("let")
def _let(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if any(a.literal is None or re.search(r"[A-Za-z_$`]", a.literal) for a in args):
        ctx.unknown_exec("let evaluates arithmetic, which can run commands hidden in variables")


@program("printf")
def _printf(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """bash's printf: ``-v NAME`` assigns (a subscript is evaluated); the rest is data."""
    i = 0
    while i < len(args) and (args[i].text or "").startswith("-"):
        t = args[i].text or ""
        if t == "--":
            i += 1
            break
        if t == "-v" and i + 1 < len(args):
            check_name(ctx, args[i + 1].literal, "printf -v")
            i += 2
            continue
        if t.startswith("-v"):
            check_name(ctx, t[2:], "printf -v")
            i += 1
            continue
        break  # the format
    if i < len(args) and args[i].text is None and i == 0:
        ctx.unknown_exec("printf with a computed first word: it could be -v NAME")


@program("echo", "true", "false", ":", "times", "caller", "break", "continue", "return",
         "exit", "shift", "disown", "bg", "fg", "help", "dirs", "clear", "tput", "locale")
def _no_effect(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """Builtins and programs that print or exit and never write, whatever their words:
    their numeric operands are checked numbers (legal_number), not arithmetic."""
    return None


@program("test", "[")
def _test(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """``test``/``[``: -v and -R take a variable name, which bash evaluates."""
    for i, a in enumerate(args):
        if a.text is None and i > 0 and args[i - 1].text in ("-v", "-R"):
            check_name(ctx, None, f"{name} {args[i - 1].text}")
        elif a.text in ("-v", "-R") and i + 1 < len(args):
            check_name(ctx, args[i + 1].literal, f"{name} {a.text}")
        elif a.text is None and i + 1 < len(args) and args[i + 1].text is not None:
            pass  # a computed operand of a comparison: compared, not evaluated


@program("wait")
def _wait(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = _WAIT.parse(args)
    if p.error is not None:
        ctx.unknown_exec(f"wait: {p.error}")
    for v in p.values("-p"):
        check_name(ctx, v.literal, "wait -p")


_WAIT = Spec("fn", "-p=", permute=False)


@program("jobs")
def _jobs(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = _JOBS.parse(args)
    if p.error is not None or p.dynamic:
        ctx.not_read_only("jobs -x runs a command; guard cannot tell which options these are")
    elif p.has("-x"):
        ctx.run(p.pos, heredoc)


_JOBS = Spec("lnprsx", permute=False)


@program("getopts")
def _getopts(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if len(args) < 2:
        return
    check_name(ctx, args[1].literal, "getopts into")
