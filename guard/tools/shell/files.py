"""File programs: readers whose options cannot make them write, and the programs that write."""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable

from guard.effects import Effect, EffectKind
from guard.tools.shell.context import Ctx
from guard.tools.shell.options import parse_opts
from guard.tools.shell.registry import ProgramHandler, program, register
from guard.tools.shell.words import Arg, clip


def _reads(ctx: Ctx, name: str, args: Iterable[Arg]) -> None:
    for a in args:
        if a.text == "-":
            continue
        ctx.read(a, f"{name} reads it")


def _simple_reader(short_value: str = "", long_value: Iterable[str] = (),
                   skip: int = 0, reads: bool = True) -> ProgramHandler:
    def handler(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
        p = parse_opts(args, short_value, long_value)
        if reads:
            _reads(ctx, name, p.pos[skip:])
            for _, v in p.opts:
                if v is not None and v.text and "/" in v.text:
                    ctx.read(v, f"{name} option value")

    return handler


for _names, _sv, _lv, _reads_files in (
    (("cat", "tac", "rev", "wc", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum",
      "sha512sum", "b2sum", "cksum", "sum", "base32", "base64", "expand", "unexpand", "fmt",
      "realpath", "readlink", "stat", "du", "df", "cmp", "comm", "strings", "ls",
      "dir", "vdir", "lsattr", "getfacl", "namei", "shasum", "sha3sum", "zcat", "bzcat",
      "xzcat", "zstdcat", "lz4cat"),
     "nNcwkmsBIdtTfDFbgejlLp", ("--max-depth", "--format", "--printf", "--block-size",
                                "--hide", "--ignore", "--width", "--tabsize", "--time-style",
                                "--bytes", "--lines", "--exclude"), True),
    (("head", "tail"), "ncs", ("--lines", "--bytes", "--pid", "--sleep-interval"), True),
    (("nl", "pr", "fold", "cut", "paste", "join", "column", "od", "hexdump", "hd", "diff",
      "diff3", "sdiff", "colordiff", "look", "numfmt", "shuf", "split_not_really"),
     "bdfhilnpsvwcjtoxeNAIjLC12", ("--delimiter", "--fields", "--characters", "--width",
                                   "--label", "--separator", "--output-delimiter"), True),
    (("echo", "true", "false", ":", "pwd", "whoami", "id", "uname", "groups",
      "nproc", "arch", "tty", "locale", "printenv", "basename", "dirname", "seq", "tr",
      "hash_not_really", "dirs", "logname", "users", "uptime", "free",
      "getconf", "jobs", "wait", "sleep", "test", "[", "expr", "factor", "cal", "ps",
      "lscpu", "lsblk", "ulimit_not_really", "help", "umask_not_really", "yes", "break",
      "continue", "return", "exit", "shift", "getopts", "caller", "times", "disown", "bg",
      "fg", "nl_not_really", "tput", "stty_not_really", "clear", "env_not_really"),
     "", (), False),
):
    register(_simple_reader(_sv, _lv, reads=_reads_files),
             *(n for n in _names if not n.endswith("_not_really")))


@program("file")
def _file(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "emfFPM", ("--exclude", "--files-from", "--separator", "--magic-file",
                                   "--parameter", "--exclude-quiet"))
    if p.dynamic:
        ctx.unknown_write("file with a computed argument: it could be -C (writes a file)")
    elif p.has("-C", "--compile"):
        # -C compiles each magic file into <its basename>.mgc in the working directory
        sources = [v.text for v in p.values("-m", "--magic-file")]
        for src in sources or ["magic"]:
            if src is None:
                ctx.unknown_write("file -C with a computed magic file name")
            else:
                ctx.write(os.path.basename(src) + ".mgc", "file -C writes a compiled magic file")
    _reads(ctx, name, p.pos)
    for v in p.values("-m", "--magic-file", "-f", "--files-from"):
        ctx.read(v, "file reads it")



@program("grep", "egrep", "fgrep", "zgrep", "ag", "ack")
def _grep(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "efmABCdD", ("--regexp", "--file", "--max-count", "--context",
                                      "--after-context", "--before-context", "--include",
                                      "--exclude", "--exclude-dir", "--label", "--color",
                                      "--binary-files", "--devices", "--directories"))
    explicit = p.has("-e", "-f", "--regexp", "--file")
    files = p.pos if explicit else p.pos[1:]
    _reads(ctx, name, files or [])
    if not files and p.has("-r", "-R", "--recursive", "--dereference-recursive"):
        ctx.read(".", f"{name} -r reads the working directory")
    for v in p.values("-f", "--file"):
        ctx.read(v, f"{name} -f reads patterns from it")


@program("rg")
def _rg(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "efgmABCtTMjE", ("--regexp", "--file", "--glob", "--type",
                                          "--max-count", "--context", "--pre", "--pre-glob",
                                          "--type-add", "--ignore-file", "--encoding",
                                          "--max-depth", "--sort", "--sortr", "--color",
                                          "--replace", "--iglob"))
    if p.dynamic:
        ctx.unknown_write("rg with a computed argument: it could be --pre (runs a program)")
    if p.has("--pre", "--search-zip", "-z"):
        ctx.unknown_exec("rg --pre/--search-zip runs other programs on each file")
    explicit = p.has("-e", "-f", "--regexp", "--file")
    files = p.pos if explicit else p.pos[1:]
    _reads(ctx, name, files)
    if not files:
        ctx.read(".", "rg searches the working directory")
    for v in p.values("-f", "--file", "--ignore-file"):
        ctx.read(v, "rg reads it")


@program("jq")
def _jq(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "fL", ("--arg", "--argjson", "--slurpfile", "--rawfile", "--indent",
                                "--from-file", "--args", "--jsonargs"))
    files = p.pos if p.has("-f", "--from-file") else p.pos[1:]
    _reads(ctx, name, files)
    for v in p.values("-f", "--from-file", "-L"):
        ctx.read(v, "jq reads it")


@program("sort")
def _sort(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "ktoST", ("--key", "--field-separator", "--output",
                                   "--buffer-size", "--temporary-directory", "--parallel",
                                   "--files0-from", "--compress-program", "--sort", "--batch-size"))
    if p.dynamic:
        ctx.unknown_write("sort with a computed argument: it could be -o FILE")
    for v in p.values("-o", "--output"):
        ctx.write(v, "sort -o writes it")
    if p.has("--compress-program"):
        ctx.unknown_exec("sort --compress-program runs a program")
    _reads(ctx, name, p.pos)


@program("uniq")
def _uniq(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars", "--group",
                                 "--all-repeated"))
    if p.dynamic:
        ctx.unknown_write("uniq with a computed argument: its second operand is an output file")
    _reads(ctx, name, p.pos[:1])
    for out in p.pos[1:2]:
        ctx.write(out, "uniq writes its second operand")


@program("tree")
def _tree(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "LPIoH", ("--filelimit", "--timefmt", "--sort", "--charset"))
    for v in p.values("-o"):
        ctx.write(v, "tree -o writes it")
    _reads(ctx, name, p.pos or [Arg(".")])


@program("xxd")
def _xxd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "cglosnC", ("-cols", "-groupsize", "-len", "-offset", "-seek", "-name"))
    if p.dynamic:
        ctx.unknown_write("xxd with a computed argument: its second operand is an output file")
    _reads(ctx, name, p.pos[:1])
    for out in p.pos[1:2]:
        ctx.write(out, "xxd writes its second operand")


@program("find")
def _find(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    i = 0
    while i < len(args) and args[i].text in ("-H", "-L", "-P", "-D", "-O"):
        i += 2 if args[i].text in ("-D", "-O") else 1
    roots: list[Arg] = []
    while i < len(args) and args[i].text is not None and not (
        args[i].text.startswith("-") or args[i].text in ("(", "!", ")", ",")  # type: ignore[union-attr]
    ):
        roots.append(args[i])
        i += 1
    expr = args[i:]
    for r in roots or [Arg(".")]:
        ctx.read(r, "find walks it")
    skip_until = -1
    for j, a in enumerate(expr):
        if j <= skip_until:
            continue
        if a.text is None:
            ctx.unknown_write("find with a computed expression word: it could be -delete or -exec")
            continue
        if a.text in ("-exec", "-execdir", "-ok", "-okdir"):
            inner = []
            skip_until = len(expr)
            for k, b in enumerate(expr[j + 1 :], start=j + 1):
                if b.text in (";", "+"):
                    skip_until = k
                    break
                braces = b.text is None or "{}" in b.text
                inner.append(Arg(None) if braces else b)
            if inner:
                # -execdir runs in each match's directory: relative names are unknown there
                cwds: list[str | None] = [None] if a.text in ("-execdir", "-okdir") else ctx.cwds
                sub = ctx.child(cwds)
                sub.run(inner, None)
                # {} is a path found below the roots: for a read that is precise enough;
                # writes and deletes stay unknown (the root's rule is not its files' rule)
                literal = all(b.text is not None for b in expr[j + 1 : skip_until])
                named = [r for r in roots or [Arg(".")] if r.literal is not None]
                for e in sub.effects:
                    if (e.kind is EffectKind.READ and e.target is None and literal and named
                            and a.text in ("-exec", "-ok") and len(named) == len(roots or [1])):
                        for r in named:
                            ctx.read(r, f"find {a.text} {inner[0].text} reads files below it")
                    else:
                        ctx.add(e)
            else:
                ctx.unknown_exec(f"find {a.text} without a command")
        elif a.text == "-delete":
            for r in roots or [Arg(".")]:
                if r.literal is None:
                    ctx.delete(None, "find -delete below a computed root")
                else:
                    ctx.delete(r, "find -delete removes matches below it")
            ctx.delete(None, "find -delete removes whatever matches")
        elif a.text in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            if j + 1 < len(expr):
                ctx.write(expr[j + 1], f"find {a.text} writes it")
            else:
                ctx.unknown_write(f"find {a.text} without a file")


_SED_SAFE_CMD = re.compile(r"^\s*(\d+|\$|/[^/]*/)?(,(\d+|\$|/[^/]*/))?\s*[pdqn=lPDNgGhHxz]?\s*$")


def _sed_script_safe(script: str) -> bool:
    """True when a sed script has no w/W/e/r commands or s///w, s///e flags."""
    for part in re.split(r"[;\n]", script):
        part = part.strip()
        if not part or _SED_SAFE_CMD.match(part):
            continue
        m = re.match(r"^(\d+|\$|/[^/]*/)?(,(\d+|\$|/[^/]*/))?\s*(y|s)(.)", part)
        if not m:
            return False
        delim = m.group(5)
        if delim in "\\\n" or delim.isalnum():
            return False
        body = part[m.end() :]
        pieces = re.split(r"(?<!\\)" + re.escape(delim), body)
        flags = pieces[-1] if len(pieces) == 3 else ""
        if len(pieces) != 3 or not re.fullmatch(r"[gpiImM0-9]*", flags):
            return False
        if "e" in flags or "w" in flags:
            return False
    return True


@program("sed", "gsed")
def _sed(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    in_place = False
    scripts: list[Arg] = []
    files: list[Arg] = []
    dynamic = False
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if t is None:
            dynamic = True
            files.append(a)
        elif t == "--":
            files.extend(args[i + 1 :])
            break
        elif t.startswith("--"):
            if t.startswith("--in-place"):
                in_place = True
            elif t == "--expression" and i + 1 < len(args):
                scripts.append(args[i + 1])
                i += 1
            elif t == "--file" and i + 1 < len(args):
                ctx.read(args[i + 1], "sed -f reads its script")
                scripts.append(Arg(None))
                i += 1
            elif t.startswith("--expression="):
                scripts.append(Arg(t.split("=", 1)[1]))
            elif t.startswith("--file="):
                ctx.read(t.split("=", 1)[1], "sed -f reads its script")
                scripts.append(Arg(None))
        elif t.startswith("-") and len(t) > 1:
            j = 1
            while j < len(t):
                ch = t[j]
                if ch == "i":
                    in_place = True
                    break  # the rest is a backup suffix
                if ch in "ef":
                    rest = t[j + 1 :]
                    value = Arg(rest) if rest else (args[i + 1] if i + 1 < len(args) else Arg(None))
                    if not rest:
                        i += 1
                    if ch == "e":
                        scripts.append(value)
                    else:
                        ctx.read(value, "sed -f reads its script")
                        scripts.append(Arg(None))
                    break
                if ch in "l":
                    if not t[j + 1 :]:
                        i += 1
                    break
                j += 1
        elif not scripts and not any(x is a for x in files):
            scripts.append(a)
        else:
            files.append(a)
        i += 1
    if dynamic:
        ctx.unknown_write("sed with a computed argument: it could be -i (edit in place)")
    if in_place:
        for f in files:
            ctx.write(f, "sed -i edits it in place")
        if not files:
            ctx.unknown_write("sed -i without a file")
    else:
        _reads(ctx, name, files)
    for s in scripts:
        if s.text is None or not _sed_script_safe(s.text):
            ctx.unknown_write(f"sed script may write files or run commands (w, e, r): "
                              f"{clip(s.text or '<computed>')}")


# ---- mutating programs


def _all_pos(short_value: str = "", long_value: Iterable[str] = (), kind: str = "write",
             skip: int = 0) -> ProgramHandler:
    def handler(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
        p = parse_opts(args, short_value, long_value)
        targets = p.pos[skip:]
        if kind in ("delete", "tee") and not targets:
            return  # rm without operands fails; tee without files only prints
        if not targets:
            ctx.unknown_write(f"{name} without operands")
        for t in targets:
            if kind == "delete":
                ctx.delete(t, f"{name} removes it")
            else:
                ctx.write(t, f"{name} changes it")
        for v in p.values("-r", "--reference"):
            ctx.read(v, f"{name} reads it")

    return handler


register(_all_pos(kind="delete"), "rm")
register(_all_pos(kind="delete"), "rmdir")
register(_all_pos(kind="delete"), "unlink")
register(_all_pos("ns", ("--iterations", "--size", "--random-source")), "shred")
register(_all_pos("dtr", ("--date", "--reference", "--time")), "touch")
def _mkdir(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """mkdir only creates directories: each target is a ``creates_dir`` write (the policy
    may let a plan agent create the plan directory). With a mode or a security context
    it sets more than a new directory: plain writes."""
    p = parse_opts(args, "m", ("--mode", "--context"))
    if not p.pos:
        ctx.unknown_write(f"{name} without operands")
    plain = p.has("-m", "--mode", "--context", "-Z")
    for t in p.pos:
        for target in ctx.targets(t):
            if plain or target is None:
                ctx.add(Effect.write(target, f"{name} changes it"))
            else:
                ctx.add(Effect.mkdir(target, f"{name} creates it"))


register(_mkdir, "mkdir")
register(_all_pos("m", ("--mode",)), "mkfifo")
register(_all_pos("m", ("--mode",)), "mknod")
register(_all_pos("sr", ("--size", "--reference")), "truncate")
register(_all_pos(kind="tee"), "tee")
register(_all_pos("mMxX", ("--modify", "--remove", "--set", "--set-file")), "setfacl")
register(_all_pos("vp"), "chattr")
register(_all_pos("nvx", ("--name", "--value", "--remove", "--restore")), "setfattr")


@program("chmod", "chown", "chgrp")
def _chmod(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "", ("--reference", "--from"))
    # chmod -x file: a mode may look like an option; treat short "options" that are modes
    mode_given = p.has("--reference") or any(
        re.fullmatch(r"-[rwxXstugo]+", o) for o, _ in p.opts)
    targets = p.pos if mode_given else p.pos[1:]
    if not targets:
        ctx.unknown_write(f"{name} without files")
    for t in targets:
        ctx.write(t, f"{name} changes its metadata")
    for v in p.values("--reference"):
        ctx.read(v, f"{name} reads it")


def _copy_like(ctx: Ctx, name: str, args: list[Arg], short_value: str,
               long_value: Iterable[str], remove_sources: bool, link: bool = False) -> None:
    p = parse_opts(args, short_value, long_value)
    target_dir = p.values("-t", "--target-directory")
    if not link and p.has("-l", "--link", "-s", "--symbolic-link"):
        link = True  # cp -l / -s makes links instead of copies
        symbolic = p.has("-s", "--symbolic-link")
    else:
        symbolic = link and p.has("-s", "--symbolic")
    if p.dynamic:
        ctx.unknown_write(f"{name} with a computed argument: destination unknown")
    if target_dir:
        sources, dests = p.pos, target_dir
    elif link and len(p.pos) == 1:
        sources, dests = p.pos, [Arg(".")]
    elif len(p.pos) >= 2:
        sources, dests = p.pos[:-1], p.pos[-1:]
    else:
        ctx.unknown_write(f"{name} with a missing operand")
        return
    into_dir = bool(target_dir) or len(sources) > 1 or (link and len(p.pos) == 1)
    no_target = p.has("-T", "--no-target-directory")
    for d in dests:
        for target in ctx.targets(d):
            if target is None:
                ctx.unknown_write(f"{name} destination is computed or globbed")
                continue
            is_dir = True if into_dir or target.endswith("/") else ctx.is_dir(target)
            if no_target:
                is_dir = False
            if is_dir is not True:
                ctx.add(Effect.write(target, f"{name} writes its destination"))
            if is_dir is False:
                continue
            for src in sources:
                base = posixpath.basename((src.literal or "").rstrip("/"))
                if not base:
                    ctx.unknown_write(f"{name} source name is computed or globbed")
                elif base not in (".", ".."):
                    why = "into the destination directory" if is_dir else \
                        "if the destination is a directory"
                    ctx.add(Effect.write(posixpath.join(target, base), f"{name} writes it {why}"))
    for s in sources:
        if link and not symbolic:
            ctx.write(s, "a hard link makes the source writable through its new name")
        elif remove_sources:
            ctx.delete(s, f"{name} removes the source")
        elif not link:
            ctx.read(s, f"{name} reads it")


@program("cp")
def _cp(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, "tSV", ("--target-directory", "--suffix", "--backup",
                                         "--sparse", "--reflink", "--preserve"), False)


@program("mv")
def _mv(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, "tS", ("--target-directory", "--suffix", "--backup"), True)


@program("ln", "link")
def _ln(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, "tS", ("--target-directory", "--suffix", "--backup"), False,
               link=True)


@program("install")
def _install(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "gmotS", ("--group", "--mode", "--owner", "--target-directory",
                                   "--suffix"))
    if p.has("-d", "--directory"):
        for t in p.pos:
            ctx.write(t, "install -d creates it")
        return
    _copy_like(ctx, name, args, "gmotS", ("--group", "--mode", "--owner",
                                          "--target-directory", "--suffix"), False)


@program("dd")
def _dd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    for a in args:
        if a.text is None:
            ctx.unknown_write("dd with a computed operand: it could be of=FILE")
        elif a.text.startswith("of="):
            ctx.write(Arg(a.text[3:], a.glob), "dd of= writes it")
        elif a.text.startswith("if="):
            ctx.read(Arg(a.text[3:], a.glob), "dd if= reads it")


@program("patch")
def _patch(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "iopdDFrBVYzgx", ("--input", "--output", "--directory",
                                            "--reject-file", "--strip", "--prefix"))
    for v in p.values("-i", "--input"):
        ctx.read(v, "patch reads the diff")
    for v in p.values("-o", "--output", "-r", "--reject-file"):
        ctx.write(v, "patch writes it")
    if p.has("--dry-run"):
        return
    if p.pos:
        ctx.write(p.pos[0], "patch edits it")
        if len(p.pos) > 1:
            ctx.read(p.pos[1], "patch reads the diff")
    ctx.unknown_write("patch edits the files named inside the diff")

