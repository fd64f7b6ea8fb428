"""Shell commands analysed, not trusted: a bash command line -> the effects it may have.

The command is parsed with tree-sitter-bash and walked node by node. What the
walk understands yields precise effects (reads, writes, deletes, network);
what it does not understand yields an *unknown* effect that the policy's
kind default decides (the shipped plan agent: unknown write -> deny, unknown
exec -> ask). The analysis over-approximates on purpose:

* every redirection target is a write (``/dev/null`` and ``/dev/std*`` aside);
* a ``cd`` adds a possible working directory rather than replacing one, so a
  relative path after it yields effects for every directory it may mean;
* function bodies, loop bodies and both arms of ``&&``/``||`` all count;
* a program given by path (``./cat``) is never the allowlisted program;
* a word with variables, globs or substitutions is an unknown target.

:func:`analyse` never raises; a parse error yields an unknown write.
"""

from __future__ import annotations

import contextvars
import os
import posixpath
import re
import shlex
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from guard.effects import Effect, EffectKind

__all__ = ["analyse", "analyse_argv", "parse_patch"]

_LANGUAGE = Language(tree_sitter_bash.language())
_PARSER = Parser(_LANGUAGE)

MAX_NESTING = 8  # bash -c inside bash -c inside ... beyond this is refused
MAX_CWDS = 16  # possible working directories tracked before giving up on precision

_SILENT_READS = frozenset({"/dev/zero", "/dev/urandom", "/dev/random", "/dev/null", "/dev/stdin"})
_SILENT_TARGETS = frozenset(
    {"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty", "/dev/zero"}
)
# Absolute program paths taken to be the program of that name (root-owned system dirs).
_SYSTEM_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/sbin", "/usr/sbin", "/usr/local/bin"})
_BRACE_EXPANSION = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")
_GLOB = re.compile(r"(?<!\\)[*?\[]")

# Variables whose assignment changes what later commands do (which program runs, what a
# program loads or executes). Anything not known to be harmless counts.
_HARMLESS_VARS = re.compile(
    r"^(LANG|LANGUAGE|LC_[A-Z]+|TZ|NO_COLOR|CLICOLOR|COLUMNS|LINES|TERM|FORCE_COLOR"
    r"|GREP_COLOR|GREP_COLORS|[a-z_][a-z0-9_]*)$"
)
# Lower-case names are script variables, but a few are read by programs anyway.
_DANGEROUS_LOWER = frozenset({"http_proxy", "https_proxy", "all_proxy", "no_proxy"})


# --------------------------------------------------------------------------- words


@dataclass(frozen=True, slots=True)
class Arg:
    """A word after the expansions we can do statically.

    ``text`` is None when the word is dynamic (variables, substitutions, brace
    expansion...). ``glob`` is set when it holds unquoted glob characters.
    """

    text: str | None
    glob: bool = False
    pipe: bool = False  # a process substitution: a pipe, not a file

    @property
    def literal(self) -> str | None:
        return None if self.glob else self.text

    def is_option(self) -> bool:
        return self.text is not None and self.text.startswith("-") and self.text != "-"


def _unescape_unquoted(text: str) -> tuple[str, bool]:
    if "\\" not in text:
        return text, ("*" in text or "?" in text or "[" in text)
    out: list[str] = []
    glob = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        if ch in "*?[":
            glob = True
        out.append(ch)
        i += 1
    return "".join(out), glob


def _unescape_double(text: str) -> str:
    return re.sub(r'\\([\\"$`\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), text)


def word_arg(node: Node) -> Arg:
    t = node.type
    raw = _text(node)
    if t in ("word", "number"):
        if _BRACE_EXPANSION.search(raw):
            return Arg(None)  # brace expansion
        text, glob = _unescape_unquoted(raw)
        return Arg(text, glob)
    if t == "raw_string":
        return Arg(raw[1:-1])
    if t in ("string", "translated_string"):
        parts: list[str] = []
        for child in node.named_children:
            if child.type == "string_content":
                parts.append(_unescape_double(_text(child)))
            else:
                return Arg(None)
        return Arg("".join(parts))
    if t == "concatenation":
        texts: list[str] = []
        glob = False
        children = node.named_children
        if _BRACE_EXPANSION.search(raw):
            return Arg(None)  # brace expansion split into words by the grammar
        for child in children:
            arg = word_arg(child)
            if arg.text is None:
                return Arg(None)
            texts.append(arg.text)
            glob = glob or arg.glob
        return Arg("".join(texts), glob)
    if t == "process_substitution":
        return Arg(None, pipe=True)
    return Arg(None)


def _text(node: Node) -> str:
    source = _SOURCE.get()
    data = source[node.start_byte : node.end_byte] if source is not None else node.text
    return data.decode("utf-8", "surrogateescape") if data is not None else ""


# --------------------------------------------------------------------------- context


@dataclass
class Ctx:
    """What the walk knows so far, and the effects it found."""

    depth: int = 0
    cwd: str | None = None  # the call's working directory, to look at the filesystem
    cwds: list[str | None] = field(default_factory=lambda: [""])
    tainted: str | None = None  # why later programs cannot be trusted to be what they seem
    effects: list[Effect] = field(default_factory=list)
    seen: set[tuple[EffectKind, str | None, str]] = field(default_factory=set)

    def add(self, effect: Effect) -> None:
        key = (effect.kind, effect.target, effect.detail)
        if key not in self.seen:
            self.seen.add(key)
            self.effects.append(effect)

    def targets(self, arg: Arg | str | None) -> list[str | None]:
        """Where a path word points, once for each possible working directory."""
        text = arg.literal if isinstance(arg, Arg) else arg
        if text is None or text == "":
            return [None]
        if text.startswith(("/", "~")):
            return [text]
        out: list[str | None] = []
        for cwd in self.cwds:
            if cwd is None:
                out.append(None)
            else:
                joined = posixpath.join(cwd, text) if cwd else text
                out.append(joined)
        return out

    def path(self, kind: EffectKind, arg: Arg | str | None, detail: str) -> None:
        if isinstance(arg, Arg) and arg.pipe and kind is EffectKind.READ:
            return  # <(...) is a pipe; its command is analysed on its own
        if kind is EffectKind.READ and isinstance(arg, Arg) and arg.glob and arg.text:
            # a glob reads only below its literal directory part
            from guard.tools.interface import glob_base

            for target in self.targets(glob_base(arg.text)):
                self.add(Effect(kind, target, detail))
            return
        for target in self.targets(arg):
            self.add(Effect(kind, target, detail))

    def is_dir(self, target: str) -> bool | None:
        """Whether ``target`` names a directory now; None when there is no cwd to ask."""
        if os.path.isabs(target):
            return os.path.isdir(target)
        if target.startswith("~"):
            return os.path.isdir(os.path.expanduser(target))
        if self.cwd is None:
            return None
        return os.path.isdir(os.path.join(self.cwd, target))

    def read(self, arg: Arg | str | None, detail: str) -> None:
        text = arg.literal if isinstance(arg, Arg) else arg
        if text in _SILENT_READS:
            return
        self.path(EffectKind.READ, arg, detail)

    def write(self, arg: Arg | str | None, detail: str) -> None:
        self.path(EffectKind.WRITE, arg, detail)

    def delete(self, arg: Arg | str | None, detail: str) -> None:
        self.path(EffectKind.DELETE, arg, detail)

    def unknown_exec(self, detail: str) -> None:
        self.add(Effect.exec(None, detail))

    def unknown_write(self, detail: str) -> None:
        self.add(Effect.write(None, detail))

    def network(self, host: str | None, detail: str) -> None:
        self.add(Effect.network(host, detail))


# --------------------------------------------------------------------------- public API


def analyse(command: str, cwd: str | None = None) -> list[Effect]:
    """The effects of running ``command`` with bash in ``cwd``. Never raises.

    Relative paths stay relative (to ``cwd``, which the evaluator applies).
    """
    ctx = Ctx(cwd=cwd)
    try:
        _analyse_source(command, ctx)
    except RecursionError:
        ctx.unknown_write("unparseable shell: nested too deeply to analyse")
    except Exception as exc:  # fail closed: an analyser bug is an unknown write
        ctx.unknown_write(f"unparseable shell: analysis failed ({type(exc).__name__}: {exc})")
    return ctx.effects


def analyse_argv(argv: list[str], cwd: str | None = None) -> list[Effect]:
    """The effects of executing ``argv`` directly (no shell), e.g. Codex's shell tool."""
    ctx = Ctx(cwd=cwd)
    try:
        if not argv or not all(isinstance(a, str) for a in argv):
            ctx.unknown_write("unparseable command: empty argv or non-string element")
        else:
            _command(ctx, [Arg(a) for a in argv], heredoc=None)
    except RecursionError:
        ctx.unknown_write("unparseable shell: nested too deeply to analyse")
    except Exception as exc:
        ctx.unknown_write(f"unparseable shell: analysis failed ({type(exc).__name__}: {exc})")
    return ctx.effects


def _analyse_source(command: str, ctx: Ctx) -> None:
    if ctx.depth > MAX_NESTING:
        ctx.unknown_write(f"unparseable shell: more than {MAX_NESTING} nested shells")
        return
    if "\x00" in command:
        ctx.unknown_write("unparseable shell: NUL byte in command")
        return
    source = command.encode("utf-8", "surrogatepass")
    # tree-sitter-bash 0.25 crashes the process on some code points beyond the BMP
    # after "${" (found by fuzzing). The parser gets each one as four ASCII bytes
    # (same offsets, same word structure); texts are read back from the original.
    safe = _ASTRAL.sub("____", command).encode("utf-8", "surrogatepass")
    tree = _PARSER.parse(safe)
    root = tree.root_node
    if root.has_error:
        bad = _first_error(root)
        where = f" at line {bad.start_point[0] + 1}, column {bad.start_point[1] + 1}" if bad else ""
        ctx.unknown_write(f"unparseable shell: syntax error{where}")
        return
    token = _SOURCE.set(source)
    try:
        _walk(ctx, root)
    finally:
        _SOURCE.reset(token)


#: Code points the parser is not given (see _analyse_source): everything beyond the BMP.
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")
#: The original bytes of the tree being walked, for node texts.
_SOURCE: contextvars.ContextVar[bytes | None] = contextvars.ContextVar("_SOURCE", default=None)


def _first_error(node: Node) -> Node | None:
    if node.type == "ERROR" or node.is_missing:
        return node
    for child in node.children:
        if child.has_error or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None


# --------------------------------------------------------------------------- tree walk

_STRUCTURAL = frozenset(
    {
        "program", "list", "pipeline", "subshell", "compound_statement", "redirected_statement",
        "if_statement", "elif_clause", "else_clause", "while_statement", "for_statement",
        "do_group", "case_statement", "case_item", "negated_command", "heredoc_body",
        "command_substitution", "process_substitution", "string", "concatenation",
        "simple_expansion", "word", "raw_string", "number", "variable_name",
        "special_variable_name", "string_content", "heredoc_content", "heredoc_start",
        "heredoc_end", "file_descriptor", "comment", "array", "ansi_c_string",
        "translated_string", "command_name", "test_operator", "regex", "extglob_pattern",
        "brace_expression", "unary_expression", "parenthesized_expression",
        "herestring_redirect", "variable_assignments", "unset_command",
    }
)
_ARITHMETIC = frozenset(
    {
        "arithmetic_expansion", "subscript", "c_style_for_statement", "binary_expression",
        "postfix_expression", "ternary_expression",
    }
)
_ARITH_TEST_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})


def _walk(ctx: Ctx, node: Node) -> None:
    t = node.type
    if not node.is_named:
        return
    if t == "command":
        _command_node(ctx, node)
    elif t == "redirected_statement":
        _redirected(ctx, node)
    elif t == "file_redirect":
        _file_redirect(ctx, node)
    elif t == "heredoc_redirect":
        if not _heredoc_quoted(node):
            # the grammar leaves `...` in a heredoc body as text; bash runs it
            for child in node.named_children:
                if child.type == "heredoc_body":
                    for m in _BACKTICKS.finditer(_text(child)):
                        _nested(ctx, m.group(1).replace("\\`", "`"), "backticks in a heredoc")
        for child in node.named_children:
            _walk(ctx, child)
    elif t == "function_definition":
        body = node.child_by_field_name("body")
        if body is not None:
            _walk(ctx, body)
    elif t == "variable_assignment":
        _assignment(ctx, node, exported=False)
    elif t == "declaration_command":
        _declaration(ctx, node)
    elif t == "expansion":
        if any(c.type == "!" for c in node.children):
            ctx.unknown_exec("indirect expansion ${!...} can evaluate array subscripts")
        for child in node.named_children:
            _walk(ctx, child)
    elif t in _ARITHMETIC or (t == "compound_statement" and _text(node).startswith("((")):
        if t == "binary_expression" and not _is_arith_binary(node):
            for child in node.named_children:
                _walk(ctx, child)
            return
        if _mentions_variable(node):
            ctx.unknown_exec(
                "arithmetic on a variable can run commands hidden in its value"
                f" ({_clip(_text(node))})"
            )
        for child in node.named_children:
            _walk(ctx, child)
    elif t == "test_command" or t in _STRUCTURAL:
        for child in node.named_children:
            _walk(ctx, child)
    else:
        ctx.unknown_exec(f"shell construct {t!r} not analysed: {_clip(_text(node))}")
        for child in node.named_children:
            _walk(ctx, child)


def _is_arith_binary(node: Node) -> bool:
    """A binary_expression inside [[ ]] is arithmetic only with -eq, -lt, ..."""
    op = node.child_by_field_name("operator")
    parent = node.parent
    while parent is not None and parent.type in ("binary_expression", "parenthesized_expression",
                                                  "unary_expression"):
        parent = parent.parent
    if parent is not None and parent.type == "test_command":
        return op is not None and _text(op) in _ARITH_TEST_OPS
    return True


def _mentions_variable(node: Node) -> bool:
    if node.type in ("variable_name", "simple_expansion", "expansion", "command_substitution"):
        return True
    if node.type == "word" and re.search(r"[A-Za-z_]", _text(node)):
        return True  # inside arithmetic a bare word is a variable name
    return any(_mentions_variable(c) for c in node.named_children)


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _redirected(ctx: Ctx, node: Node) -> None:
    heredoc: str | None = None
    for child in node.named_children:
        if child.type == "heredoc_redirect":
            heredoc = _heredoc_text(child)
    body = node.child_by_field_name("body")
    for child in node.named_children:
        if body is not None and child.id == body.id and body.type == "command":
            _command_node(ctx, body, heredoc=heredoc)
        else:
            _walk(ctx, child)


_BACKTICKS = re.compile(r"`((?:[^`\\]|\\.)*)`", re.S)


def _heredoc_quoted(node: Node) -> bool:
    start = next((c for c in node.named_children if c.type == "heredoc_start"), None)
    return start is not None and any(q in _text(start) for q in "'\"\\")


def _heredoc_text(node: Node) -> str | None:
    """The literal body of a heredoc, or None when it expands anything."""
    quoted = _heredoc_quoted(node)
    for child in node.named_children:
        if child.type == "heredoc_body":
            if any(c.type != "heredoc_content" for c in child.named_children):
                return None
            text = _text(child)
            if not quoted and ("`" in text or "$" in text or "\\" in text):
                return None
            return text
    return None


def _file_redirect(ctx: Ctx, node: Node) -> None:
    op = ""
    for child in node.children:
        if not child.is_named:
            op = _text(child)
            break
    dest = node.child_by_field_name("destination")
    for child in node.named_children:
        _walk(ctx, child)
    if dest is None:
        ctx.unknown_write(f"redirection without a target: {_clip(_text(node))}")
        return
    arg = word_arg(dest)
    if op in ("<&", ">&", "<&-", ">&-") and arg.text is not None and (
        arg.text.isdigit() or arg.text == "-"
    ):
        return  # duplicating or closing a descriptor
    if arg.literal in _SILENT_TARGETS or (arg.literal or "").startswith("/dev/fd/"):
        return
    if op == "<":
        ctx.read(arg, "redirection <")
        return
    if op in ("<>",):
        ctx.read(arg, f"redirection {op}")
    ctx.write(arg, f"redirection {op or '?'}")


def _assignment(ctx: Ctx, node: Node, exported: bool) -> None:
    name_node = node.child_by_field_name("name")
    name = _text(name_node) if name_node is not None else ""
    if name_node is not None and name_node.type == "subscript":
        _walk(ctx, name_node)
        name = _text(name_node.child_by_field_name("name") or name_node)
    _taint_if_dangerous(ctx, name)
    for child in node.named_children:
        if name_node is None or child.id != name_node.id:
            _walk(ctx, child)


def _taint_if_dangerous(ctx: Ctx, name: str) -> None:
    if not _HARMLESS_VARS.match(name) or name in _DANGEROUS_LOWER:
        ctx.tainted = ctx.tainted or f"the script sets {name}, which changes what programs do"


def _declaration(ctx: Ctx, node: Node) -> None:
    keyword = _text(node.children[0]) if node.children else ""
    for child in node.named_children:
        if child.type == "variable_assignment":
            _assignment(ctx, child, exported=True)
        elif child.type == "word":
            text = _text(child)
            if text.startswith("-") and re.search(r"[inA-Za]*[in]", text.lstrip("-+")):
                if set(text.lstrip("-+")) & {"i", "n"}:
                    ctx.unknown_exec(f"{keyword} {text}: integer and nameref variables evaluate"
                                     " their values")
            elif keyword in ("export", "readonly", "declare", "typeset", "local"):
                _taint_if_dangerous(ctx, text.split("=", 1)[0])
        else:
            _walk(ctx, child)


def _command_node(ctx: Ctx, node: Node, heredoc: str | None = None) -> None:
    argv: list[Arg] = []
    assigns: list[str] = []
    for child in node.named_children:
        if child.type == "variable_assignment":
            name_node = child.child_by_field_name("name")
            assigns.append(_text(name_node) if name_node is not None else "?")
            for sub in child.named_children:
                _walk(ctx, sub)
        elif child.type == "command_name":
            inner = child.named_children
            argv.append(word_arg(inner[0]) if inner else Arg(None))
            for sub in inner:
                _walk(ctx, sub)
        elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            if child.type == "heredoc_redirect" and heredoc is None:
                heredoc = _heredoc_text(child)
            _walk(ctx, child)
        elif child.type == "comment":
            continue
        else:
            argv.append(word_arg(child))
            _walk(ctx, child)
    if not argv:
        return
    saved = ctx.tainted
    for name in assigns:
        if not _HARMLESS_VARS.match(name) or name in _DANGEROUS_LOWER:
            ctx.tainted = ctx.tainted or f"{name}=... set for this command changes what it does"
    _command(ctx, argv, heredoc)
    ctx.tainted = saved  # a prefix assignment lasts for this command only


# --------------------------------------------------------------------------- commands


def _command(ctx: Ctx, argv: list[Arg], heredoc: str | None) -> None:
    name_arg = argv[0]
    args = argv[1:]
    name = name_arg.literal
    if name is None:
        ctx.unknown_exec("program name is computed at run time (variable or substitution)")
        ctx.unknown_write("a computed program name can be any program")
        return
    if "/" in name:
        head, base = posixpath.split(posixpath.normpath(name))
        if not (name.startswith("/") and head in _SYSTEM_BIN_DIRS and base in _PROGRAMS):
            ctx.add(Effect.exec(name, f"program given by path: {name} (not analysed)"))
            ctx.unknown_exec(f"{name} is not the allowlisted program of the same name")
            return
        name = base  # /usr/bin/rm is rm: system directories hold the real programs
    handler = _PROGRAMS.get(name)
    if handler is None:
        _unknown_program(ctx, name, args)
        return
    if ctx.tainted and handler not in _WRAPPER_HANDLERS:
        ctx.unknown_exec(f"{name}: {ctx.tainted}")
    handler(ctx, name, args, heredoc)


def _unknown_program(ctx: Ctx, name: str, args: list[Arg]) -> None:
    found = shutil.which(name)
    if found is None:
        ctx.unknown_exec(f"program {name!r} is not known to guard and not found on PATH")
    else:
        ctx.add(Effect.exec(found, f"{name}: program not analysed, may do anything"))
        ctx.unknown_exec(f"{name}: program not analysed, may do anything")


ProgramHandler = Callable[[Ctx, str, list[Arg], "str | None"], None]
_PROGRAMS: dict[str, ProgramHandler] = {}
_WRAPPER_HANDLERS: set[ProgramHandler] = set()


def _program(*names: str, wrapper: bool = False) -> Callable[[ProgramHandler], ProgramHandler]:
    def register(fn: ProgramHandler) -> ProgramHandler:
        for n in names:
            _PROGRAMS[n] = fn
        if wrapper:
            _WRAPPER_HANDLERS.add(fn)
        return fn

    return register


@dataclass
class Parsed:
    opts: list[tuple[str, Arg | None]]  # ("-o", value) / ("--output", value)
    pos: list[Arg]
    dynamic: bool  # a dynamic word stood where an option could be

    def has(self, *names: str) -> bool:
        return any(o in names for o, _ in self.opts)

    def values(self, *names: str) -> list[Arg]:
        return [v for o, v in self.opts if o in names and v is not None]


def parse_opts(
    args: list[Arg],
    short_value: str = "",
    long_value: Iterable[str] = (),
    stop_at_first_positional: bool = False,
) -> Parsed:
    """getopt-style splitting. Unknown options are kept as flags."""
    long_set = set(long_value)
    opts: list[tuple[str, Arg | None]] = []
    pos: list[Arg] = []
    dynamic = False
    i = 0
    while i < len(args):
        a = args[i]
        text = a.text
        if text is None:
            dynamic = True
            pos.append(a)
            i += 1
            continue
        if text == "--":
            pos.extend(args[i + 1 :])
            break
        if text.startswith("--") and len(text) > 2:
            name, eq, value = text.partition("=")
            if eq:
                opts.append((name, Arg(value, a.glob)))
            elif name in long_set and i + 1 < len(args):
                opts.append((name, args[i + 1]))
                i += 1
            else:
                opts.append((name, None))
            i += 1
            continue
        if text.startswith("-") and len(text) > 1:
            j = 1
            while j < len(text):
                ch = text[j]
                if ch in short_value:
                    rest = text[j + 1 :]
                    if rest:
                        opts.append((f"-{ch}", Arg(rest, a.glob)))
                    elif i + 1 < len(args):
                        opts.append((f"-{ch}", args[i + 1]))
                        i += 1
                    else:
                        opts.append((f"-{ch}", None))
                    break
                opts.append((f"-{ch}", None))
                j += 1
            i += 1
            continue
        pos.append(a)
        if stop_at_first_positional:
            pos.extend(args[i + 1 :])
            break
        i += 1
    return Parsed(opts, pos, dynamic)


# ---- read-only programs whose options cannot make them write


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
      "realpath", "readlink", "file", "stat", "du", "df", "cmp", "comm", "strings", "ls",
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
    (("echo", "printf", "true", "false", ":", "pwd", "whoami", "id", "uname", "groups",
      "nproc", "arch", "tty", "locale", "printenv", "basename", "dirname", "seq", "tr",
      "which", "type", "hash_not_really", "dirs", "logname", "users", "uptime", "free",
      "getconf", "jobs", "wait", "sleep", "test", "[", "expr", "factor", "cal", "ps",
      "lscpu", "lsblk", "ulimit_not_really", "help", "umask_not_really", "yes", "break",
      "continue", "return", "exit", "shift", "getopts", "caller", "times", "disown", "bg",
      "fg", "nl_not_really", "tput", "stty_not_really", "clear", "env_not_really"),
     "", (), False),
):
    _h = _simple_reader(_sv, _lv, reads=_reads_files)
    for _n in _names:
        if not _n.endswith("_not_really"):
            _PROGRAMS[_n] = _h


@_program("file")
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


@_program("printf")
def _printf(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "v")
    for v in p.values("-v"):
        if v.text is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v.text):
            ctx.unknown_exec("printf -v with an array subscript evaluates it")
        else:
            _taint_if_dangerous(ctx, v.text)


@_program("grep", "egrep", "fgrep", "zgrep", "ag", "ack")
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


@_program("rg")
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


@_program("jq")
def _jq(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "fL", ("--arg", "--argjson", "--slurpfile", "--rawfile", "--indent",
                                "--from-file", "--args", "--jsonargs"))
    files = p.pos if p.has("-f", "--from-file") else p.pos[1:]
    _reads(ctx, name, files)
    for v in p.values("-f", "--from-file", "-L"):
        ctx.read(v, "jq reads it")


@_program("sort")
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


@_program("uniq")
def _uniq(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "fsw", ("--skip-fields", "--skip-chars", "--check-chars", "--group",
                                 "--all-repeated"))
    if p.dynamic:
        ctx.unknown_write("uniq with a computed argument: its second operand is an output file")
    _reads(ctx, name, p.pos[:1])
    for out in p.pos[1:2]:
        ctx.write(out, "uniq writes its second operand")


@_program("tree")
def _tree(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "LPIoH", ("--filelimit", "--timefmt", "--sort", "--charset"))
    for v in p.values("-o"):
        ctx.write(v, "tree -o writes it")
    _reads(ctx, name, p.pos or [Arg(".")])


@_program("xxd")
def _xxd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "cglosnC", ("-cols", "-groupsize", "-len", "-offset", "-seek", "-name"))
    if p.dynamic:
        ctx.unknown_write("xxd with a computed argument: its second operand is an output file")
    _reads(ctx, name, p.pos[:1])
    for out in p.pos[1:2]:
        ctx.write(out, "xxd writes its second operand")


@_program("find")
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
                sub = Ctx(depth=ctx.depth + 1, cwd=ctx.cwd, cwds=cwds, tainted=ctx.tainted)
                _command(sub, inner, None)
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


@_program("sed", "gsed")
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
                              f"{_clip(s.text or '<computed>')}")


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


_PROGRAMS["rm"] = _all_pos(kind="delete")
_PROGRAMS["rmdir"] = _all_pos(kind="delete")
_PROGRAMS["unlink"] = _all_pos(kind="delete")
_PROGRAMS["shred"] = _all_pos("ns", ("--iterations", "--size", "--random-source"))
_PROGRAMS["touch"] = _all_pos("dtr", ("--date", "--reference", "--time"))
_PROGRAMS["mkdir"] = _all_pos("m", ("--mode", "--context"))
_PROGRAMS["mkfifo"] = _all_pos("m", ("--mode",))
_PROGRAMS["mknod"] = _all_pos("m", ("--mode",))
_PROGRAMS["truncate"] = _all_pos("sr", ("--size", "--reference"))
_PROGRAMS["tee"] = _all_pos(kind="tee")
_PROGRAMS["setfacl"] = _all_pos("mMxX", ("--modify", "--remove", "--set", "--set-file"))
_PROGRAMS["chattr"] = _all_pos("vp")
_PROGRAMS["setfattr"] = _all_pos("nvx", ("--name", "--value", "--remove", "--restore"))


@_program("chmod", "chown", "chgrp")
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


@_program("cp")
def _cp(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, "tSV", ("--target-directory", "--suffix", "--backup",
                                         "--sparse", "--reflink", "--preserve"), False)


@_program("mv")
def _mv(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, "tS", ("--target-directory", "--suffix", "--backup"), True)


@_program("ln", "link")
def _ln(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    _copy_like(ctx, name, args, "tS", ("--target-directory", "--suffix", "--backup"), False,
               link=True)


@_program("install")
def _install(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "gmotS", ("--group", "--mode", "--owner", "--target-directory",
                                   "--suffix"))
    if p.has("-d", "--directory"):
        for t in p.pos:
            ctx.write(t, "install -d creates it")
        return
    _copy_like(ctx, name, args, "gmotS", ("--group", "--mode", "--owner",
                                          "--target-directory", "--suffix"), False)


@_program("dd")
def _dd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    for a in args:
        if a.text is None:
            ctx.unknown_write("dd with a computed operand: it could be of=FILE")
        elif a.text.startswith("of="):
            ctx.write(Arg(a.text[3:], a.glob), "dd of= writes it")
        elif a.text.startswith("if="):
            ctx.read(Arg(a.text[3:], a.glob), "dd if= reads it")


@_program("patch")
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


@_program("rsync")
def _rsync(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "efBT", ("--rsh", "--filter", "--exclude", "--include", "--log-file",
                                  "--temp-dir", "--backup-dir", "--rsync-path", "--password-file",
                                  "--files-from", "--exclude-from", "--include-from"))
    if p.has("-e", "--rsh", "--rsync-path"):
        ctx.unknown_exec("rsync -e/--rsync-path runs a program")
    if len(p.pos) < 2 or p.dynamic:
        ctx.unknown_write("rsync with a missing or computed operand")
    for i, a in enumerate(p.pos):
        text = a.literal
        remote = text is not None and re.match(r"^[^/]*:", text) is not None
        if remote and text is not None:
            host = text.split(":", 1)[0].split("@")[-1] or None
            ctx.network(host, "rsync talks to a remote host")
        elif i == len(p.pos) - 1 and len(p.pos) >= 2:
            ctx.write(a, "rsync writes the destination")
        else:
            ctx.read(a, "rsync reads the source")
    if p.has("--remove-source-files"):
        for a in p.pos[:-1]:
            ctx.delete(a, "rsync --remove-source-files")
    for v in p.values("--log-file", "--backup-dir", "--temp-dir"):
        ctx.write(v, "rsync writes it")


_CURL_WRITES = ("-o", "--output", "-D", "--dump-header", "-c", "--cookie-jar", "--trace",
                "--trace-ascii", "--stderr", "--libcurl", "--etag-save", "--hsts", "--alt-svc")


@_program("curl")
def _curl(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "odcDHXAeEFTuUxrbKwmyYzCQ",
                   (*_CURL_WRITES, "--data", "--data-binary", "--data-raw", "--header",
                    "--request", "--user-agent", "--form", "--upload-file", "--user", "--proxy",
                    "--cookie", "--config", "--url", "--output-dir", "--max-time", "--retry",
                    "--write-out", "--connect-timeout", "--cacert", "--cert", "--key",
                    "--data-urlencode", "--referer", "--range", "--resolve"))
    from guard.tools.interface import url_host

    urls = [a for a in p.pos] + p.values("--url")
    for u in urls:
        ctx.network(url_host(u.literal) if u.literal else None, "curl fetches it")
    if not urls:
        ctx.network(None, "curl with no literal URL")
    for v in p.values(*_CURL_WRITES):
        if v.text != "-":
            ctx.write(v, "curl writes it")
    if p.has("-O", "--remote-name", "--remote-name-all", "-J", "--remote-header-name"):
        ctx.unknown_write("curl -O writes a file named by the server or URL")
    for v in p.values("-T", "--upload-file", "-K", "--config"):
        ctx.read(v, "curl reads it")
    for v in p.values("-d", "--data", "--data-binary", "-F", "--form", "--data-urlencode"):
        if v.text and "@" in v.text:
            ctx.read(v.text.split("@", 1)[1], "curl uploads it")
    if p.dynamic:
        ctx.unknown_write("curl with a computed argument: it could be -o FILE")


@_program("wget")
def _wget(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    p = parse_opts(args, "OoaPiUetTwQlAR", (
        "--output-document", "--output-file", "--append-output", "--directory-prefix",
        "--input-file", "--user-agent", "--execute", "--tries", "--timeout", "--wait", "--quota"))
    from guard.tools.interface import url_host

    for u in p.pos:
        ctx.network(url_host(u.literal) if u.literal else None, "wget fetches it")
    outs = p.values("-O", "--output-document")
    for v in outs:
        if v.text != "-":
            ctx.write(v, "wget writes it")
    for v in p.values("-o", "--output-file", "-a", "--append-output"):
        ctx.write(v, "wget logs into it")
    if not outs and not p.has("--spider"):
        ctx.unknown_write("wget saves downloads under names taken from the URL")
    if p.has("-e", "--execute"):
        ctx.unknown_exec("wget -e runs wgetrc commands")


_PKG_READONLY = {
    "pip": {"list", "show", "freeze", "check", "help", "--version", "search", "index", "inspect"},
    "npm": {"ls", "list", "view", "info", "show", "help", "--version", "outdated", "search",
            "explain", "why", "config_not"},
    "cargo": {"--version", "help", "search", "tree", "metadata", "verify-project", "version"},
}


@_program("pip", "pip3", "pipx", "uv", "poetry", "pdm", "conda", "mamba", "npm", "npx", "pnpm",
          "yarn", "bun", "deno", "cargo", "go", "gem", "bundle", "composer", "apt", "apt-get",
          "dpkg", "yum", "dnf", "apk", "brew", "make", "gmake", "cmake", "ninja", "mvn", "gradle",
          "rake", "just", "tox", "nox", "pytest", "docker", "podman", "kubectl", "terraform",
          "systemctl", "service", "mount", "umount", "crontab", "at", "ssh", "scp", "sftp",
          "nc", "ncat", "socat", "telnet", "ftp")
def _builder(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    base = name.rstrip("3")
    sub = next((a.text for a in args if a.text and not a.text.startswith("-")), None)
    first = args[0].text if args else None
    allowed = _PKG_READONLY.get(base, set())
    if (sub in allowed and not any(a.text is None for a in args)) or first in ("--version",):
        ctx.unknown_exec(f"{name} {sub or first}: runs {name} (its configuration may run code)")
        return
    ctx.unknown_exec(f"{name} runs builds, installs or remote commands")
    ctx.unknown_write(f"{name} {sub or ''}".strip() + " changes files guard cannot name")
    if name in ("pip", "pip3", "npm", "npx", "pnpm", "yarn", "cargo", "go", "gem", "apt",
                "apt-get", "ssh", "scp", "sftp", "nc", "ncat", "socat", "telnet", "ftp",
                "docker", "podman", "uv", "poetry", "bundle", "composer", "brew"):
        ctx.network(None, f"{name} may reach the network")


# ---- git


_GIT_READ = frozenset({
    "status", "log", "diff", "show", "blame", "annotate", "rev-parse", "ls-files", "ls-tree",
    "cat-file", "describe", "shortlog", "grep", "rev-list", "name-rev", "whatchanged",
    "merge-base", "for-each-ref", "show-ref", "show-branch", "version", "help", "count-objects",
    "diff-tree", "diff-files", "diff-index", "check-ignore", "check-attr", "var", "cherry",
    "range-diff", "verify-commit", "verify-tag", "fsck",
})
_GIT_INDEX_ONLY = frozenset({"add", "commit", "stash", "tag", "fetch", "notes", "update-ref",
                             "update-index", "gc", "prune", "repack", "reflog", "replace",
                             "branch", "remote", "symbolic-ref", "push", "submodule",
                             "sparse-checkout", "lfs", "maintenance", "bisect", "filter-branch",
                             "pack-refs", "write-tree", "commit-tree", "mktag", "hash-object",
                             "config", "format-patch", "bundle", "archive"})
_GIT_TREE = frozenset({"checkout", "switch", "reset", "restore", "merge", "rebase", "pull",
                       "apply", "am", "cherry-pick", "revert", "clean", "rm", "mv", "stash",
                       "read-tree", "checkout-index", "worktree", "submodule", "filter-repo",
                       "bisect", "sparse-checkout"})
_GIT_NETWORK = frozenset({"fetch", "pull", "push", "clone", "ls-remote", "submodule",
                          "remote", "archive", "lfs"})
_GIT_READ_OPTS_BAD = ("--output", "--ext-diff", "-O", "--open-files-in-pager", "--exec",
                      "--upload-pack", "--receive-pack")


@_program("git")
def _git(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    base: str | None = ""
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if t is None:
            ctx.unknown_write("git with a computed argument before its subcommand")
            ctx.unknown_exec("git with a computed argument before its subcommand")
            return
        if t in ("-c", "--config-env") or (t.startswith(("--config-env=", "--exec-path",
                                                         "-c")) and t != "-C"):
            ctx.unknown_exec(f"git {t}: configuration on the command line can run any program"
                             " (core.fsmonitor, core.hooksPath, aliases, pagers)")
            ctx.unknown_write(f"git {t}: configuration on the command line can write anywhere")
            return
        if t == "-C" and i + 1 < len(args):
            d = args[i + 1].literal
            base = None if d is None else (posixpath.join(base, d) if base else d)
            i += 2
            continue
        if t.startswith(("--git-dir", "--work-tree", "--namespace", "--super-prefix")):
            ctx.unknown_write(f"git {t}: repository chosen on the command line")
            i += 1 if "=" in t else 2
            continue
        if t in ("--no-pager", "-P", "--paginate", "-p", "--no-replace-objects", "--bare",
                 "--literal-pathspecs", "--glob-pathspecs", "--noglob-pathspecs",
                 "--icase-pathspecs", "--no-optional-locks", "--version", "--help", "-h",
                 "--html-path", "--man-path", "--info-path"):
            if t in ("--version", "--help", "-h"):
                return
            i += 1
            continue
        if t.startswith("-"):
            ctx.unknown_exec(f"git option {t} not analysed")
            i += 1
            continue
        break
    if i >= len(args):
        return
    sub = args[i].text or ""
    rest = args[i + 1 :]
    repo = "." if base == "" else base

    def at(path: str) -> str | None:
        if repo is None:
            return None
        return posixpath.normpath(posixpath.join(repo, path)) if repo != "." else path

    rest_texts = [a.text for a in rest]
    dyn = any(t is None for t in rest_texts)
    bad_opt = next((t for t in rest_texts if t and t.startswith(_GIT_READ_OPTS_BAD)), None)

    readonly = sub in _GIT_READ
    if sub == "branch":
        readonly = all(t in ("-a", "-r", "-v", "-vv", "--all", "--remotes", "--show-current",
                             "--list", "-l", "--verbose", "--no-color", "--color",
                             "--merged", "--no-merged", "--contains") for t in rest_texts)
    elif sub == "tag":
        readonly = all(t in ("-l", "--list", "-n") for t in rest_texts) or not rest_texts
    elif sub == "remote":
        readonly = all(t in ("-v", "--verbose", "show", "get-url") or (t and not t.startswith("-")
                       and rest_texts[:1] in (["show"], ["get-url"], ["-v"])) for t in rest_texts)
    elif sub == "config":
        readonly = any(t in ("--get", "--get-all", "--get-regexp", "--list", "-l", "get",
                             "list", "--show-origin") for t in rest_texts) and not any(
            t in ("--add", "--unset", "--unset-all", "--replace-all", "--rename-section",
                  "--remove-section", "-e", "--edit", "set", "unset") for t in rest_texts)
    elif sub == "stash":
        readonly = bool(rest_texts) and rest_texts[0] in ("list", "show")
    elif sub == "worktree":
        readonly = bool(rest_texts) and rest_texts[0] == "list"
    elif sub == "reflog":
        readonly = not rest_texts or rest_texts[0] == "show"
    elif sub == "fsck":
        readonly = not any(t and t.startswith("--lost-found") for t in rest_texts)
    if readonly and (dyn or bad_opt):
        why = f"option {bad_opt}" if bad_opt else "a computed argument"
        ctx.unknown_write(f"git {sub} with {why}: it can write files or run programs")
        if bad_opt and bad_opt.startswith(("--output",)):
            for a in rest:
                if a.text and a.text.startswith("--output="):
                    ctx.write(a.text.split("=", 1)[1], f"git {sub} --output writes it")
        return
    if readonly:
        ctx.read(at(".") if repo is not None else None, f"git {sub} reads the repository")
        if sub in ("diff", "log", "show") and any(t == "--no-index" for t in rest_texts):
            for a in rest:
                if a.text and not a.text.startswith("-"):
                    ctx.read(a, "git diff --no-index reads it")
        return
    if sub == "clone":
        ctx.network(None, "git clone fetches a repository")
        pos = [a for a in rest if a.text and not a.text.startswith("-")]
        if len(pos) >= 2:
            ctx.write(pos[1], "git clone creates it")
        else:
            ctx.unknown_write("git clone creates a directory named after the repository")
        if any(t is None or (t or "").startswith(("-c", "--config", "-u", "--upload-pack",
                                                  "--template")) for t in rest_texts):
            ctx.unknown_exec("git clone option can run programs")
        return
    if sub == "init":
        pos = [a for a in rest if a.text and not a.text.startswith("-")]
        target = pos[0] if pos else Arg(at(".") if repo is not None else None)
        ctx.write(target, "git init creates a repository there")
        if target.literal is not None:
            ctx.write(posixpath.join(target.literal, ".git"), "git init creates .git")
        return
    if sub == "config":
        if any(t in ("--global",) for t in rest_texts):
            ctx.write("~/.gitconfig", "git config --global changes it")
        elif any(t in ("--system",) for t in rest_texts):
            ctx.write("/etc/gitconfig", "git config --system changes it")
        else:
            ctx.write(at(".git/config"), "git config changes the repository configuration")
        files = [a for j, a in enumerate(rest) if j > 0 and rest_texts[j - 1] in ("-f", "--file")]
        for f in files:
            ctx.write(f, "git config --file changes it")
        return
    if sub in _GIT_INDEX_ONLY or sub in _GIT_TREE:
        ctx.write(at(".git"), f"git {sub} changes the repository")
        if sub in _GIT_TREE:
            ctx.write(at("."), f"git {sub} changes files in the working tree")
        if sub in _GIT_NETWORK:
            ctx.network(None, f"git {sub} talks to a remote")
        if sub in ("commit", "merge", "rebase", "am", "push", "checkout", "switch",
                   "cherry-pick", "revert", "pull"):
            ctx.unknown_exec(f"git {sub} runs the repository's hooks")
        if sub == "worktree":
            pos = [a for a in rest[1:] if a.text and not a.text.startswith("-")]
            for a in pos[:1]:
                ctx.write(a, "git worktree add creates it")
        if sub in ("format-patch", "archive", "bundle"):
            ctx.unknown_write(f"git {sub} writes output files")
        return
    if sub == "ls-remote":
        ctx.network(None, "git ls-remote talks to a remote")
        return
    ctx.unknown_exec(f"git {sub}: subcommand not analysed (may be an alias)")
    ctx.unknown_write(f"git {sub}: subcommand not analysed (may be an alias)")


# ---- wrappers and nested shells


def _unwrap(ctx: Ctx, rest: list[Arg], heredoc: str | None, why: str) -> None:
    if not rest:
        return
    _command(ctx, rest, heredoc)


@_program("env", wrapper=True)
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
                _chdir(ctx, args[i + 1])
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
            _command(ctx, words, heredoc)
            return
        if t.startswith("-"):
            i += 1
            continue
        if "=" in t and not t.startswith("="):
            var = t.split("=", 1)[0]
            if not _HARMLESS_VARS.match(var) or var in _DANGEROUS_LOWER:
                saved = ctx.tainted
                ctx.tainted = ctx.tainted or f"env sets {var}, which changes what programs do"
                _command(ctx, args[i + 1 :], heredoc) if i + 1 < len(args) else None
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
    ("command", _skip_opts_then_run("", bad=())),
    ("builtin", _skip_opts_then_run("")),
    ("exec", _skip_opts_then_run("a", bad=())),
    ("stdbuf", _skip_opts_then_run("ioe", ("--input", "--output", "--error"))),
    ("chronic", _skip_opts_then_run("")),
    ("coproc", _skip_opts_then_run("")),
    ("unbuffer", _skip_opts_then_run("")),
):
    _PROGRAMS[_w] = _h
    _WRAPPER_HANDLERS.add(_h)


@_program("command", "type", "which", "hash", wrapper=True)
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
        _command(ctx, args[i:], heredoc)


@_program("xargs", wrapper=True)
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
        _command(ctx, inner, heredoc)
    else:
        _command(ctx, [*inner, Arg(None)], heredoc)


_SHELLS = ("bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "busybox_sh", "rbash")


@_program(*_SHELLS)
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
        _nested(ctx, script.text, f"{name} -c")
        return
    if i >= len(args):
        if heredoc is not None:
            _nested(ctx, heredoc, f"{name} reading a heredoc")
            return
        ctx.unknown_exec(f"{name} reads commands from standard input")
        ctx.unknown_write(f"{name} reads commands from standard input")
        return
    target = args[i]
    ctx.read(target, f"{name} runs this script")
    _source_file(ctx, target, name)


@_program("eval")
def _eval(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    if any(a.literal is None and a.text is None for a in args):
        ctx.unknown_exec("eval of a computed string")
        ctx.unknown_write("eval of a computed string")
        return
    _nested(ctx, " ".join(a.text or "" for a in args), "eval")


@_program("source", ".")
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


def _nested(ctx: Ctx, source: str, how: str) -> None:
    sub = Ctx(depth=ctx.depth + 1, cwd=ctx.cwd, cwds=list(ctx.cwds), tainted=ctx.tainted)
    _analyse_source(source, sub)
    for e in sub.effects:
        ctx.add(e)
    ctx.cwds = _merge_cwds(ctx.cwds, sub.cwds)
    ctx.tainted = ctx.tainted or sub.tainted


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


@_program(*_INTERPRETERS)
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


def _chdir(ctx: Ctx, arg: Arg | None) -> None:
    if arg is None:
        new: list[str | None] = ["~"]
    elif arg.literal is None or arg.text == "-":
        new = [None]
    else:
        new = list(ctx.targets(arg))
    ctx.cwds = _merge_cwds(ctx.cwds, new)


def _merge_cwds(old: list[str | None], new: list[str | None]) -> list[str | None]:
    out = list(old)
    for c in new:
        if c not in out:
            out.append(c)
    if len(out) > MAX_CWDS:
        out = [c for c in out[:MAX_CWDS]]
        if None not in out:
            out.append(None)
    return out


@_program("cd", "pushd", "popd", wrapper=True)
def _cd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    rest = [a for a in args if not (a.text or "").startswith("-") or a.text == "-"]
    if name == "popd" or (name == "pushd" and not rest):
        _chdir(ctx, Arg(None))
        return
    _chdir(ctx, rest[0] if rest else None)


@_program("export", "readonly", "declare", "typeset", "local", "unset", wrapper=True)
def _export_cmd(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    for a in args:
        if a.text is None:
            ctx.tainted = ctx.tainted or f"{name} with a computed name"
            ctx.unknown_exec(f"{name} with a computed argument")
        elif not a.text.startswith("-"):
            _taint_if_dangerous(ctx, a.text.split("=", 1)[0])


@_program("read", "mapfile", "readarray")
def _read_builtin(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    """read/mapfile assign variables; a subscripted name or -C callback evaluates code."""
    p = parse_opts(args, "adinNptuCcs", ())
    if p.has("-C"):
        ctx.unknown_exec(f"{name} -C runs a callback")
    for a in [*p.pos, *p.values("-a")]:
        if a.text is None or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", a.text):
            ctx.unknown_exec(f"{name} into {a.text or 'a computed name'}: subscripts are evaluated")
        else:
            _taint_if_dangerous(ctx, a.text)


@_program("let")
def _let(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    ctx.unknown_exec("let evaluates arithmetic, which can run commands hidden in variables")


# ---- apply_patch (Codex), also reachable from a shell


_PATCH_HEADER = re.compile(r"^\*\*\* (Add File|Update File|Delete File|Move to): (.*)$")


def parse_patch(body: str) -> list[Effect]:
    """Effects of an apply_patch body: writes for Add/Update/Move to, deletes for Delete."""
    effects: list[Effect] = []
    last_update: str | None = None
    seen_header = False
    for raw in body.splitlines():
        line = raw.rstrip("\r")
        m = _PATCH_HEADER.match(line)
        if not m:
            if line.startswith("*** ") and line.strip() not in ("*** Begin Patch", "*** End Patch",
                                                                "*** End of File"):
                effects.append(Effect.write(None, f"apply_patch: unrecognised header {line!r}"))
            continue
        seen_header = True
        op, path = m.group(1), m.group(2).strip()
        if not path:
            effects.append(Effect.write(None, f"apply_patch: {op} without a path"))
            continue
        if op == "Add File":
            effects.append(Effect.write(path, "apply_patch adds it"))
            last_update = None
        elif op == "Update File":
            effects.append(Effect.write(path, "apply_patch updates it"))
            last_update = path
        elif op == "Delete File":
            effects.append(Effect.delete(path, "apply_patch deletes it"))
            last_update = None
        else:  # Move to
            effects.append(Effect.write(path, "apply_patch moves a file here"))
            if last_update is None:
                effects.append(Effect.write(None, "apply_patch: Move to without Update File"))
            else:
                effects.append(Effect.delete(last_update, "apply_patch moves it away"))
    if not seen_header:
        effects.append(Effect.write(None, "apply_patch: no file headers found in the patch"))
    return effects


@_program("apply_patch", "applypatch")
def _apply_patch(ctx: Ctx, name: str, args: list[Arg], heredoc: str | None) -> None:
    body = args[0].text if args else heredoc
    if body is None:
        ctx.unknown_write("apply_patch with a computed patch")
        return
    for e in parse_patch(body):
        if e.target is None or e.kind is EffectKind.TOOL:
            ctx.add(e)
        else:
            ctx.path(e.kind, e.target, e.detail)
