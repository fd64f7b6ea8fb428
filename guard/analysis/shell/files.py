"""File programs: readers driven by their option tables, and the programs that write."""

from __future__ import annotations

import posixpath
import re

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.option_parser import Parsed, Spec, apply, could_be_option
from guard.analysis.shell.registry import ProgramHandler, program, register
from guard.analysis.shell.sedscript import check_sed_script
from guard.analysis.shell.tables import file_options as tables
from guard.analysis.shell.words import Arg, clip
from guard.effects import Effect, EffectKind


def _reads(ctx: Ctx, name: str, args: list[Arg]) -> None:
    for a in args:
        if a.text == "-":
            continue
        ctx.read(a, f"{name} reads it")


def _table_reader(spec: Spec, operands: str) -> ProgramHandler:
    def handler(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
        p = spec.parse(args)
        if not apply(ctx, name, spec, p):
            return
        if operands == "read":
            _reads(ctx, name, p.pos)
        elif operands == "look":  # look STRING [FILE]
            _reads(ctx, name, p.pos[1:2])
        elif operands == "shuf":  # shuf -e/-i: operands are lines, not files
            if not p.has("-e", "-i"):
                _reads(ctx, name, p.pos)
        elif operands == "date":  # date +FORMAT; date MMDDhhmm sets the clock
            if any(a.literal is None or not a.literal.startswith("+") for a in p.pos):
                ctx.not_read_only(f"{name} with an operand that is not +FORMAT sets the clock")
        elif operands == "sets":  # hostname NAME sets it
            if p.pos:
                ctx.not_read_only(f"{name} with an operand changes system state")
        elif operands == "uniq":  # uniq [INPUT [OUTPUT]]
            if p.dynamic:
                ctx.unknown_write("uniq with a computed argument: its second operand is an"
                                  " output file")
            _reads(ctx, name, p.pos[:1])
            for out in p.pos[1:2]:
                ctx.write(out, "uniq writes its second operand")
            if len(p.pos) > 2:
                ctx.not_read_only("uniq with an extra operand")

    return handler


for _name, (_spec, _operands) in tables.READERS.items():
    if _operands != "file":
        register(_table_reader(_spec, _operands), _name)


@program("file")
def _file(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    spec = tables.READERS["file"][0]
    p = spec.parse(args)
    if not apply(ctx, name, spec, p):
        return
    if p.dynamic:
        ctx.unknown_write("file with a computed argument: it could be -C (writes a file)")
    if p.has("-C"):
        # -C compiles each magic file into <its basename>.mgc in the working directory
        for src in p.values("-m") or [Arg("magic")]:
            if src.literal is None:
                ctx.unknown_write("file -C with a computed magic file name")
            else:
                ctx.write(posixpath.basename(src.literal) + ".mgc",
                          "file -C writes a compiled magic file")
    _reads(ctx, name, p.pos)


def _pattern_then_files(ctx: Ctx, name: str, p: Parsed, explicit: bool) -> list[Arg]:
    files = p.pos if explicit else p.pos[1:]
    _reads(ctx, name, files)
    return files


@program("grep", "egrep", "fgrep")
def _grep(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.GREP.parse(args)
    if not apply(ctx, name, tables.GREP, p):
        return
    files = _pattern_then_files(ctx, name, p, p.has("-e", "-f"))
    if not files and p.has("-r", "-R", "--recursive", "--dereference-recursive"):
        ctx.read(".", f"{name} -r reads the working directory")


@program("rg")
def _rg(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.RG.parse(args)
    if not apply(ctx, name, tables.RG, p):
        return
    explicit = p.has("-e", "-f", "--regexp", "--file") or p.has("--files", "--type-list")
    if not _pattern_then_files(ctx, name, p, explicit):
        ctx.read(".", "rg searches the working directory")


@program("jq")
def _jq(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.JQ.parse(args)
    if not apply(ctx, name, tables.JQ, p):
        return
    _pattern_then_files(ctx, name, p, False)
    if p.has("-f"):
        _reads(ctx, name, p.pos[:1])
    program_text = None if p.has("-f") or not p.pos else p.pos[0].literal
    if program_text is None or _JQ_MODULES.search(program_text):
        # jq's own grammar: `import "x" as $d;` reads x.json, `include`/`import` read .jq
        # files, from the search path (-L, ~/.jq, beside the jq binary), not from operands
        ctx.read(None, "jq import/include reads modules and data files from its search path")


_JQ_MODULES = re.compile(r"\b(import|include|modulemeta|get_search_list)\b")


def _find_words(ctx: Ctx, expr: list[Arg]) -> list[tuple[Arg, list[Arg], int]] | None:
    """Split a find expression into (primary, its arguments, index); None when a word is
    not a known primary (reported as not read-only)."""
    out: list[tuple[Arg, list[Arg], int]] = []
    j = 0
    while j < len(expr):
        a = expr[j]
        t = a.text
        if t is None or could_be_option(a):
            ctx.not_read_only("find with a computed expression word: it could be -delete or -exec")
            return None
        known = tables.FIND_PRIMARIES.get(t)
        if known is None and re.fullmatch(r"-newer[aBcmt][aBcmt]", t):
            known = (1, "")
        if known is None:
            ctx.not_read_only(f"find: unknown primary {t!r}; guard cannot tell what it does")
            return None
        arity, _ = known
        if arity < 0:  # -exec ... ; or +
            k = j + 1
            while k < len(expr) and expr[k].text not in (";", "+"):
                k += 1
            if k >= len(expr):
                ctx.not_read_only(f"find {t} without a terminating ; or +")
                return None
            out.append((a, expr[j + 1 : k], j))
            j = k + 1
            continue
        if j + arity >= len(expr) + (0 if arity else 1):
            ctx.not_read_only(f"find {t} without its argument")
            return None
        out.append((a, expr[j + 1 : j + 1 + arity], j))
        j += 1 + arity
    return out


@program("find")
def _find(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    i = 0
    while i < len(args) and args[i].text in tables.FIND_FRONT:
        i += 1 + tables.FIND_FRONT[args[i].text or ""]
    roots: list[Arg] = []
    while i < len(args) and not could_be_option(args[i]) and not (
        (args[i].text or "").startswith("-") or args[i].text in ("(", "!", ")", ",")
    ):
        roots.append(args[i])
        i += 1
    words = _find_words(ctx, args[i:])
    if words is None:
        return
    for r in roots or [Arg(".")]:
        ctx.read(r, "find walks it")
    for a, vals, _ in words:
        t = a.text or ""
        role = tables.FIND_PRIMARIES.get(t, (1, ""))[1]
        if role == "read":
            ctx.read(vals[0], f"find {t} reads it")
        elif role == "write":
            ctx.write(vals[0], f"find {t} writes it")
        elif role == "delete":
            for r in roots or [Arg(".")]:
                if r.literal is None:
                    ctx.delete(None, "find -delete below a computed root")
                else:
                    ctx.delete(r, "find -delete removes matches below it")
            ctx.delete(None, "find -delete removes whatever matches")
        elif role == "exec":
            _find_exec(ctx, t, vals, roots)


def _find_exec(ctx: Ctx, t: str, words: list[Arg], roots: list[Arg]) -> None:
    inner = [Arg(None) if (b.text is None or "{}" in b.text) else b for b in words]
    if not inner:
        ctx.not_read_only(f"find {t} without a command")
        return
    # -execdir runs in each match's directory: relative names are unknown there
    cwds: list[str | None] = [None] if t in ("-execdir", "-okdir") else ctx.cwds
    sub = ctx.child(cwds)
    sub.run(inner, None)
    # {} is a path found below the roots: for a read that is precise enough;
    # writes and deletes stay unknown (the root's rule is not its files' rule)
    literal = all(b.text is not None for b in words)
    named = [r for r in roots or [Arg(".")] if r.literal is not None]
    for e in sub.effects:
        if (e.kind is EffectKind.READ and e.target is None and literal and named
                and t in ("-exec", "-ok") and len(named) == len(roots or [1])):
            for r in named:
                ctx.read(r, f"find {t} {inner[0].text} reads files below it")
        else:
            ctx.add(e)


@program("sed")
def _sed(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.SED.parse(args)
    if not apply(ctx, name, tables.SED, p):
        return
    if p.dynamic:
        ctx.not_read_only("sed with a computed argument: it could be -i (edit in place)")
        return
    scripts = p.values("-e")
    files = p.pos
    if not scripts and not p.has("-f"):
        scripts, files = p.pos[:1], p.pos[1:]
    if p.has("-i"):
        for f in files:
            ctx.write(f, "sed -i edits it in place")
        if not files:
            ctx.unknown_write("sed -i without a file")
    else:
        _reads(ctx, name, files)
    if p.has("-f"):
        ctx.unknown_write("sed -f: a script file may write files or run commands (w, e, r)")
    texts = [s.text for s in scripts]
    if any(t is None for t in texts):
        ctx.not_read_only("sed with a computed script: it may write files or run commands"
                          " (w, e, r)")
        return
    try:
        check_sed_script("\n".join(t for t in texts if t is not None))  # sed joins -e so
    except ValueError as exc:
        ctx.not_read_only(f"sed script may write files or run commands, or sed could read it"
                          f" differently: {exc}: {clip(' '.join(t or '' for t in texts))}")


# ---- mutating programs


def _all_pos(kind: str = "write") -> ProgramHandler:
    def handler(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
        spec = tables.WRITERS[name]
        p = spec.parse(args)
        if p.error is not None:
            ctx.not_read_only(f"{name}: {p.error}; guard cannot tell what it does")
            return
        apply(ctx, name, spec, p)
        if kind in ("delete", "tee") and not p.pos:
            return  # rm without operands fails; tee without files only prints
        if not p.pos:
            ctx.unknown_write(f"{name} without operands")
        for t in p.pos:
            if kind == "delete":
                ctx.delete(t, f"{name} removes it")
            elif name in _NODES:
                ctx.create_node(t, _NODES[name], f"{name} creates {_NODES[name]}")
            else:
                ctx.write(t, f"{name} changes it")

    return handler


#: programs whose operands become something other than a regular file
_NODES = {"mkfifo": "a FIFO", "mknod": "a device node or FIFO"}

for _name in ("rm", "rmdir", "unlink"):
    register(_all_pos("delete"), _name)
for _name in ("shred", "touch", "mkfifo", "mknod", "truncate"):
    register(_all_pos(), _name)
register(_all_pos("tee"), "tee")


@program("mkdir")
def _mkdir(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """mkdir only creates directories: each target is a ``creates_dir`` write (the policy
    may let a plan agent create the plan directory). With a mode or a security context
    it sets more than a new directory: plain writes."""
    spec = tables.WRITERS["mkdir"]
    p = spec.parse(args)
    if p.error is not None:
        ctx.not_read_only(f"{name}: {p.error}; guard cannot tell what it does")
        return
    if not p.pos:
        ctx.unknown_write(f"{name} without operands")
    plain = p.dynamic or p.has("-m", "--context", "-Z")
    for t in p.pos:
        for target in ctx.targets(t):
            if plain or target is None:
                ctx.add(Effect.write(target, f"{name} changes it"))
            else:
                ctx.add(Effect.mkdir(target, f"{name} creates it"))


@program("chmod", "chown", "chgrp")
def _chmod(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    spec = tables.CHMOD if name == "chmod" else tables.CHOWN
    mode = re.compile(r"-[rwxXstugoa=+,0-7-]+")
    words = [a for a in args if not (name == "chmod" and a.literal and mode.fullmatch(a.literal))]
    mode_given = len(words) != len(args)
    p = spec.parse(words)
    if p.error is not None or p.dynamic:
        ctx.not_read_only(f"{name}: {p.error or 'a computed argument'}")
        return
    apply(ctx, name, spec, p)
    targets = p.pos if (mode_given or p.has("--reference")) else p.pos[1:]
    if not targets:
        ctx.unknown_write(f"{name} without files")
    for t in targets:
        ctx.write(t, f"{name} changes its metadata")


@program("tree")
def _tree(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.TREE.parse(args)
    if apply(ctx, name, tables.TREE, p):
        _reads(ctx, name, p.pos or [Arg(".")])


@program("xxd")
def _xxd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.XXD.parse(args)
    if not apply(ctx, name, tables.XXD, p):
        return
    if p.dynamic:
        ctx.unknown_write("xxd with a computed argument: its second operand is an output file")
    _reads(ctx, name, p.pos[:1])
    for out in p.pos[1:2]:
        ctx.write(out, "xxd writes its second operand")
    if len(p.pos) > 2:
        ctx.not_read_only("xxd with an extra operand")


@program("setfacl", "chattr", "setfattr")
def _metadata(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """Metadata changers: every literal operand may be changed (modes, owners and ACL
    specifications among them are over-approximated as paths)."""
    for a in args:
        if a.text is None or could_be_option(a):
            ctx.unknown_write(f"{name} with a computed argument")
        elif not a.text.startswith("-") or a.text == "-":
            ctx.write(a, f"{name} changes its metadata")
    ctx.unknown_write(f"{name} changes file metadata")


def _copy_like(ctx: Ctx, name: str, args: list[Arg], remove_sources: bool,
               link: bool = False) -> None:
    spec = tables.WRITERS["ln" if name == "link" else name]
    p = spec.parse(args)
    if p.error is not None:
        ctx.not_read_only(f"{name}: {p.error}; guard cannot tell what it does")
        return
    apply(ctx, name, spec, p)
    target_dir = p.values("-t")
    if not link and p.has("-l", "-s"):
        link = True  # cp -l / -s makes links instead of copies
        symbolic = p.has("-s")
    else:
        symbolic = link and p.has("-s")
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
    node = _created_node(name, p, link, symbolic)
    backup = "--backup" if p.has("-b", "--backup", "-S") else ""
    no_target = p.has("-T")
    for d in dests:
        for target in ctx.targets(d):
            if target is None:
                ctx.unknown_write(f"{name} destination is computed or globbed")
                continue
            is_dir = True if into_dir or target.endswith("/") else ctx.is_dir(target)
            if no_target:
                is_dir = False
            if is_dir is not True:
                ctx.add(Effect(EffectKind.WRITE, target, f"{name} writes its destination",
                               creates=node))
                if backup:
                    ctx.unknown_write(f"{name} {backup} writes a backup file beside {target}")
            if is_dir is False:
                continue
            for src in sources:
                base = posixpath.basename((src.literal or "").rstrip("/"))
                if not base:
                    ctx.unknown_write(f"{name} source name is computed or globbed")
                elif base not in (".", ".."):
                    why = "into the destination directory" if is_dir else \
                        "if the destination is a directory"
                    ctx.add(Effect(EffectKind.WRITE, posixpath.join(target, base),
                                   f"{name} writes it {why}", creates=node))
                    if backup:
                        ctx.unknown_write(f"{name} {backup} writes a backup file beside it")
    if p.has("--parents"):
        ctx.unknown_write(f"{name} --parents writes below the destination")
    for s in sources:
        if link and not symbolic:
            ctx.write(s, "a hard link makes the source writable through its new name")
        elif remove_sources:
            ctx.delete(s, f"{name} removes the source")
        elif not link:
            ctx.read(s, f"{name} reads it")


def _created_node(name: str, p: Parsed, link: bool, symbolic: bool) -> str:
    """What a copy-like program makes at its destination besides a plain regular file:
    a symlink (``ln -s``, ``cp -s``), a copy of a symlink (``cp -P``/``-d``/``-a``/``-R``
    without ``-L``), a file with set owner or mode bits (``install -o/-g/-m``, ``cp -p``)."""
    if symbolic:
        return "a symlink"
    if name == "cp" and not link and not p.has("-L", "-H") and p.has("-P", "-d", "-a", "-R"):
        return "a copy of a symlink when a source is one"
    if name == "cp" and p.has("-p", "-a", "--preserve"):
        return "a copy keeping its source's owner and mode bits"
    if name == "install" and p.has("-o", "-g", "-m"):
        return "a file with the owner, group or mode install sets"
    return ""


@program("cp")
def _cp(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, False)


@program("mv")
def _mv(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, True)


@program("ln", "link")
def _ln(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, False, link=True)


@program("install")
def _install(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = tables.WRITERS["install"].parse(args)
    if p.error is None and p.has("-d"):
        apply(ctx, name, tables.WRITERS["install"], p)
        for t in p.pos:
            ctx.write(t, "install -d creates it")
        if not p.pos:
            ctx.unknown_write("install -d without operands")
        return
    _copy_like(ctx, name, args, False)


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
    """patch edits the files its diff names (and may run ed for ed-style diffs), whatever
    its options say (--dry-run included): never read-only."""
    for a in args:
        if a.literal is not None and not a.literal.startswith("-"):
            ctx.write(a, "patch may edit it")
    ctx.not_read_only("patch edits the files named inside the diff and may run ed")
