"""The walk: a bash command line -> a tree-sitter tree -> the effects of every command in it.

Bash constructs are handled here; each simple command goes to the handler of its
program in :mod:`guard.analysis.shell.registry` (filled by the program modules, imported
at the end of this module). Handlers call back through :class:`Ctx` and never
import this module.
"""

from __future__ import annotations

import posixpath
import re
import shutil

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from guard.analysis.shell import evaluation
from guard.analysis.shell.context import Ctx, Walker, evaluates_code, is_dangerous_var
from guard.analysis.shell.registry import PROGRAMS, WRAPPERS
from guard.analysis.shell.words import (
    PLAIN_WORDS,
    SOURCE,
    Arg,
    clip,
    plain_word_arg,
    stray_dollar,
    text_of,
    word_arg,
)
from guard.effects import Effect

_LANGUAGE = Language(tree_sitter_bash.language())
PARSER = Parser(_LANGUAGE)

MAX_NESTING = 8  # bash -c inside bash -c inside ... beyond this is refused

# Absolute program paths taken to be the program of that name (root-owned system dirs).
_SYSTEM_BIN_DIRS = frozenset({"/bin", "/usr/bin", "/sbin", "/usr/sbin", "/usr/local/bin"})


# --------------------------------------------------------------------------- public API


def analyse(command: str, cwd: str | None = None) -> list[Effect]:
    """The effects of running ``command`` with bash in ``cwd``. Never raises.

    Relative paths stay relative (to ``cwd``, which the evaluator applies).
    """
    ctx = Ctx(cwd=cwd, walker=WALKER)
    try:
        _analyse_source(command, ctx)
        for e in ctx.fds.effects():
            ctx.add(e)
    except RecursionError:
        ctx.unknown_write("unparseable shell: nested too deeply to analyse")
    except Exception as exc:  # fail closed: an analyser bug is an unknown write
        ctx.unknown_write(f"unparseable shell: analysis failed ({type(exc).__name__}: {exc})")
    return ctx.effects


def analyse_argv(argv: list[str], cwd: str | None = None) -> list[Effect]:
    """The effects of executing ``argv`` directly (no shell), e.g. Codex's shell tool."""
    ctx = Ctx(cwd=cwd, walker=WALKER)
    try:
        if not argv or not all(isinstance(a, str) for a in argv):
            ctx.unknown_write("unparseable command: empty argv or non-string element")
        else:
            _command(ctx, [Arg(a) for a in argv], heredoc=None)
            for e in ctx.fds.effects():
                ctx.add(e)
    except RecursionError:
        ctx.unknown_write("unparseable shell: nested too deeply to analyse")
    except Exception as exc:
        ctx.unknown_write(f"unparseable shell: analysis failed ({type(exc).__name__}: {exc})")
    return ctx.effects


def analyse_flat(command: str, cwd: str | None = None) -> tuple[list[Effect], str | None]:
    """:func:`analyse` for a command whose every word guard read itself (guard's grammar):
    (its effects, None), or (effects so far, what it found) when some program would run
    a shell script the analysis would have to parse again (``sh -c``, ``xargs sh``...)."""
    nested: list[str] = []

    def source(text: str, ctx: Ctx) -> None:
        if ctx.depth > 0:
            nested.append(f"a nested shell script {clip(text)!r}")
            ctx.unknown_write("a nested shell script")
            return
        _analyse_source(text, ctx)

    ctx = Ctx(cwd=cwd, walker=Walker(command=_command, source=source))
    try:
        source(command, ctx)
        for e in ctx.fds.effects():
            ctx.add(e)
    except Exception as exc:  # fail closed
        nested.append(f"the analysis failed ({type(exc).__name__}: {exc})")
    return ctx.effects, (nested[0] if nested else None)


def _analyse_source(command: str, ctx: Ctx) -> None:
    if ctx.depth > MAX_NESTING:
        ctx.unknown_write(f"unparseable shell: more than {MAX_NESTING} nested shells")
        return
    unsafe = unsafe_text(command)
    if unsafe is not None:
        ctx.not_read_only(f"unparseable shell: {unsafe}; bash and guard could read it"
                          " differently")
        return
    source = command.encode("utf-8", "surrogatepass")
    # tree-sitter-bash 0.25 crashes the process on some code points beyond the BMP
    # after "${" (found by fuzzing). The parser gets each one as four ASCII bytes
    # (same offsets, same word structure); texts are read back from the original.
    safe = source if command.isascii() else _ASTRAL.sub("____", command).encode(
        "utf-8", "surrogatepass")
    tree = PARSER.parse(safe)
    root = tree.root_node
    if root.has_error:
        bad = _first_error(root)
        where = f" at line {bad.start_point[0] + 1}, column {bad.start_point[1] + 1}" if bad else ""
        ctx.unknown_write(f"unparseable shell: syntax error{where}")
        return
    if "\\ " in command:
        gap = _escaped_space_between_tokens(root, safe)
        if gap is not None:
            ctx.not_read_only(f"unparseable shell: a backslash before a space at byte {gap} stands"
                              " between words for the parser and starts a word for bash")
            return
    token = SOURCE.set(source)
    try:
        _walk(ctx, root)
    finally:
        SOURCE.reset(token)


#: bytes bash and tree-sitter-bash may read differently (the parser skips VT, FF and CR as
#: whitespace, bash does not): control characters other than TAB and LF, and a backslash
#: before anything but printable ASCII or LF (``\\<TAB>``, ``\\<CR><LF>``, a trailing one)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BAD_ESCAPE = re.compile(r"\\(?![\x20-\x7e\n])")


def unsafe_text(command: str) -> str | None:
    """Why bash and the parser could read ``command`` differently, or None when it holds only
    characters both read alike: printable characters, TAB and LF. Anything that is not valid
    UTF-8 (a lone surrogate), a control or format character, or Unicode whitespace other than
    the ASCII space is refused, and so is a backslash before anything but printable ASCII
    or LF."""
    m = _CONTROL.search(command)
    if m is not None:
        return f"control character {m.group()!r} at character {m.start()}"
    m = _BAD_ESCAPE.search(command) if "\\" in command else None
    if m is not None:
        after = command[m.start() + 1 : m.start() + 2]
        what = f"a backslash before {after!r}" if after else "a backslash at the end"
        return f"{what} at character {m.start()}"
    if not command.isascii():
        for i, ch in enumerate(command):
            if not ch.isprintable() and ch not in "\t\n":
                return f"character U+{ord(ch):04X} at character {i} (not printable, or not UTF-8)"
    return None


def _escaped_space_between_tokens(root: Node, source: bytes) -> int | None:
    """The byte offset of a ``\\ `` the parser skipped as whitespace (tree-sitter-bash takes
    it for a line continuation where a word may start; bash reads an escaped space that
    begins a word: ``ls \\ #; touch x`` runs ``touch``), or None."""
    i = source.find(b"\\ ")
    while i >= 0:
        node = root.descendant_for_byte_range(i, i + 1)
        if node is not None and node.child_count > 0 and not any(
                c.start_byte <= i < c.end_byte for c in node.children):
            return i
        i = source.find(b"\\ ", i + 2)
    return None


#: Code points the parser is not given (see _analyse_source): everything beyond the BMP.
_ASTRAL = re.compile("[\U00010000-\U0010FFFF]")


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
        "brace_expression", "herestring_redirect", "variable_assignments",
    }
)
_ARITH_ROOTS = frozenset({"arithmetic_expansion", "c_style_for_statement"})
_EXPRESSIONS = frozenset({"binary_expression", "postfix_expression", "ternary_expression",
                          "unary_expression", "parenthesized_expression"})


#: named nodes without named children worth a visit (most of a tree): returned from at once
_LEAVES = PLAIN_WORDS | frozenset({  # PLAIN_WORDS: word, number, raw_string
    "string_content", "variable_name", "special_variable_name", "comment", "heredoc_content",
    "heredoc_start", "heredoc_end", "file_descriptor", "test_operator", "regex",
    "extglob_pattern", "ansi_c_string",
})
#: containers whose children are walked with no check of their own
_PLAIN = _STRUCTURAL - _LEAVES - {"compound_statement", "redirected_statement"}


def _walk(ctx: Ctx, node: Node) -> None:
    t = node.type
    if t in _LEAVES or not node.is_named:
        return
    if t in _PLAIN:
        if t == "for_statement":  # for NAME in ...: assigns NAME
            var = node.child_by_field_name("variable")
            if var is not None:
                ctx.taint_if_dangerous(text_of(var))
        for child in node.named_children:
            _walk(ctx, child)
    elif t == "command":
        _command_node(ctx, node)
    elif t == "redirected_statement":
        _redirected(ctx, node)
    elif t == "file_redirect":
        _file_redirect(ctx, node)
    elif t == "heredoc_redirect":
        why = _heredoc_disagreement(node)
        if why is not None:
            ctx.not_read_only(f"heredoc: {why}; bash could read it differently")
            return
        if not _heredoc_quoted(node):
            # the grammar leaves `...` in a heredoc body as text; bash runs it
            for child in node.named_children:
                if child.type == "heredoc_body":
                    for m in _BACKTICKS.finditer(text_of(child)):
                        ctx.nested(m.group(1).replace("\\`", "`"), "backticks in a heredoc")
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
        evaluation.expansion(ctx, node)
        for child in node.named_children:
            _walk(ctx, child)
    elif t == "subscript":
        evaluation.subscript(ctx, node)
        for child in node.named_children:
            _walk(ctx, child)
    elif t in _ARITH_ROOTS or (t == "compound_statement" and node.child_count > 0
                               and node.children[0].type == "(("):
        for child in node.named_children:
            if child.type not in ("do_group", "compound_statement"):
                evaluation.arithmetic(ctx, child, "arithmetic")
            _walk(ctx, child)
    elif t in _EXPRESSIONS:
        if _in_test(node):
            evaluation.test_expression(ctx, node)
        for child in node.named_children:
            _walk(ctx, child)
    elif t == "unset_command":
        _unset(ctx, node)
    elif t == "test_command" or t in _STRUCTURAL:
        for child in node.named_children:
            _walk(ctx, child)
    else:
        ctx.unknown_exec(f"shell construct {t!r} not analysed: {clip(text_of(node))}")
        for child in node.named_children:
            _walk(ctx, child)


def _in_test(node: Node) -> bool:
    """Whether an expression node is a condition of ``[[ ]]`` (not arithmetic inside one)."""
    parent = node.parent
    while parent is not None and parent.type in ("parenthesized_expression",
                                                  "binary_expression", "unary_expression"):
        if parent.type == "binary_expression" and any(
                c.type == "test_operator" and text_of(c) in evaluation.ARITH_TEST_OPS
                for c in parent.children):
            return False
        parent = parent.parent
    return parent is not None and parent.type == "test_command"


def _name_arg(node: Node) -> Arg:
    return Arg(text_of(node)) if node.type == "variable_name" else word_arg(node)


def _unset(ctx: Ctx, node: Node) -> None:
    for child in node.named_children:
        arg = _name_arg(child)
        if arg.text is not None and arg.text.startswith("-"):
            continue
        evaluation.check_name(ctx, arg.literal, "unset")
        _walk(ctx, child)


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
    return start is not None and any(q in text_of(start) for q in "'\"\\")


#: delimiters guard reads as bash does: a plain word, quoted whole, or after a backslash
_HEREDOC_START = re.compile(
    r"""(?P<q>['"]?)(?P<w>[A-Za-z0-9_.\-]+)(?P=q)|\\(?P<e>[A-Za-z0-9_.\-]+)""")
#: what runs code in an expanded heredoc body (plain $NAME only substitutes a value)
_BODY_CODE = re.compile(r"\$[({\[]")


def _heredoc_disagreement(node: Node) -> str | None:
    """Why bash could read this heredoc otherwise than the parser did, or None.

    Checked against bash's rules: the body ends at the first line that is exactly the
    delimiter (after leading tabs with ``<<-``), the delimiter is the start word after
    quote removal, and a body whose delimiter is unquoted is expanded: every ``$(``,
    ``${`` and ``$[`` in it must be a substitution the parser found (it finds none in a
    ``<<-`` body, so there they are refused)."""
    dash = False
    start = body = end = None
    for c in node.children:
        t = c.type
        if t == "heredoc_start":
            start = c
        elif t == "heredoc_body":
            body = c
        elif t == "heredoc_end":
            end = c
        elif t == "<<-":
            dash = True
    if start is None:
        return "no delimiter"
    m = _HEREDOC_START.fullmatch(text_of(start))
    if m is None:
        return f"a delimiter guard does not read ({clip(text_of(start))})"
    delim = m.group("w") or m.group("e")
    quoted = bool(m.group("q") or m.group("e"))
    if end is None or text_of(end) != delim:
        return f"the body does not end at a line {delim!r}"
    text = text_of(body) if body is not None else ""
    if delim in text:
        for line in text.split("\n")[:-1]:
            if (line.lstrip("\t") if dash else line) == delim:
                return f"the body holds a line {delim!r}, where bash ends it"
    source = SOURCE.get()
    if source is not None and end.end_byte < len(source) and source[end.end_byte:end.end_byte + 1] \
            not in (b"\n", b""):
        return f"text after the closing {delim!r} on its line"
    if quoted or body is None or not _BODY_CODE.search(text):
        return None
    if dash:
        return "an expanded <<- body holding $(, ${ or $[ (the parser leaves it as text)"
    found = [c for c in body.named_children if c.type != "heredoc_content"]
    for mm in _BODY_CODE.finditer(text):
        at = body.start_byte + len(text[: mm.start()].encode("utf-8", "surrogatepass"))
        if not any(c.start_byte <= at < c.end_byte for c in found):
            return f"an expansion the parser did not find in the body ({clip(text[mm.start():])})"
    return None


def _heredoc_text(node: Node) -> str | None:
    """The literal body of a heredoc, or None when it expands anything."""
    quoted = _heredoc_quoted(node)
    for child in node.named_children:
        if child.type == "heredoc_body":
            if any(c.type != "heredoc_content" for c in child.named_children):
                return None
            text = text_of(child)
            if not quoted and ("`" in text or "$" in text or "\\" in text):
                return None
            return text
    return None


def _file_redirect(ctx: Ctx, node: Node) -> None:
    op = ""
    for child in node.children:
        if not child.is_named:
            op = text_of(child)
            break
    dest = node.child_by_field_name("destination")
    for child in node.named_children:
        _walk(ctx, child)
    if dest is None:
        ctx.unknown_write(f"redirection without a target: {clip(text_of(node))}")
        return
    arg = word_arg(dest)
    if op in ("<&", ">&", "<&-", ">&-") and arg.text is not None and (
        arg.text.isdigit() or arg.text == "-"
    ):
        return  # duplicating or closing a descriptor
    if op in ("<", "<&"):
        ctx.input_redirect(arg)
        ctx.read(arg, f"redirection {op}")
        return
    if op in ("<>",):
        ctx.read(arg, f"redirection {op}")
    ctx.write(arg, f"redirection {op or '?'}")


def _assignment(ctx: Ctx, node: Node, exported: bool) -> None:
    name_node = node.child_by_field_name("name")
    name = text_of(name_node) if name_node is not None else ""
    if name_node is not None and name_node.type == "subscript":
        _walk(ctx, name_node)
        name = text_of(name_node.child_by_field_name("name") or name_node)
    ctx.taint_if_dangerous(name)
    for child in node.named_children:
        if name_node is None or child.id != name_node.id:
            _walk(ctx, child)


def _declaration(ctx: Ctx, node: Node) -> None:
    keyword = text_of(node.children[0]) if node.children else ""
    for child in node.named_children:
        if child.type == "variable_assignment":
            _assignment(ctx, child, exported=True)
            value = child.child_by_field_name("value")
            if value is not None and value.type != "array":
                arg = word_arg(value)
                if arg.text is None or arg.text.lstrip().startswith("("):
                    ctx.unknown_exec(f"{keyword} {clip(text_of(child))}: a computed or"
                                     " parenthesised value may be parsed as a compound"
                                     " assignment")
            continue
        arg = _name_arg(child)
        text = arg.literal
        if text is not None and text.startswith(("-", "+")) and len(text) > 1:
            if set(text[1:]) & {"i", "n"}:
                ctx.unknown_exec(f"{keyword} {text}: integer and nameref variables evaluate"
                                 " their values")
        else:
            evaluation.check_assignment_word(ctx, text, keyword)
        _walk(ctx, child)


def _command_node(ctx: Ctx, node: Node, heredoc: str | None = None) -> None:
    argv: list[Arg] = []
    assigns: list[str] = []
    children = node.named_children
    if node.child_count != len(children):  # anonymous `$` words (`sed -e $ -e ...`)
        if stray_dollar(node) is not None:
            ctx.not_read_only(f"a `$` glued to a quote ($\"...\"): bash reads one word, the"
                              f" parser two: {clip(text_of(node))}")
            return
        children = node.children
    for child in children:
        t = child.type
        if t == "$":
            argv.append(Arg("$"))  # bash reads a `$` that starts no expansion as itself
            continue
        if not child.is_named:
            continue
        if t in PLAIN_WORDS:  # most arguments: a leaf, nothing inside to walk
            argv.append(plain_word_arg(child, t))
        elif t == "variable_assignment":
            name_node = child.child_by_field_name("name")
            assigns.append(text_of(name_node) if name_node is not None else "?")
            for sub in child.named_children:
                _walk(ctx, sub)
        elif t == "command_name":
            inner = child.named_children
            argv.append(word_arg(inner[0]) if inner else Arg(None))
            for sub in inner:
                if sub.type not in _LEAVES:
                    _walk(ctx, sub)
        elif t in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
            if t == "heredoc_redirect" and heredoc is None:
                heredoc = _heredoc_text(child)
            _walk(ctx, child)
        elif t == "comment":
            continue
        else:
            argv.append(word_arg(child))
            if t not in _LEAVES:
                _walk(ctx, child)
    if not argv:
        return
    saved = ctx.tainted
    for name in assigns:
        if evaluates_code(name):
            ctx.not_read_only(f"{name}=... set for a command: bash evaluates its value as code"
                              " at run time (prompts and set -x, new shells)")
        if is_dangerous_var(name):
            ctx.tainted = ctx.tainted or f"{name}=... set for this command changes what it does"
    _command(ctx, argv, heredoc)
    ctx.tainted = saved  # a prefix assignment lasts for this command only


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
        if not (name.startswith("/") and head in _SYSTEM_BIN_DIRS and base in PROGRAMS):
            ctx.add(Effect.exec(name, f"program given by path: {name} (not analysed)"))
            ctx.unknown_exec(f"{name} is not the allowlisted program of the same name")
            return
        name = base  # /usr/bin/rm is rm: system directories hold the real programs
    handler = PROGRAMS.get(name)
    if handler is None:
        _unknown_program(ctx, name, args)
        return
    if ctx.tainted and handler not in WRAPPERS:
        ctx.unknown_exec(f"{name}: {ctx.tainted}")
    handler(ctx, name, args, heredoc)


def _unknown_program(ctx: Ctx, name: str, args: list[Arg]) -> None:
    found = shutil.which(name)
    if found is None:
        ctx.unknown_exec(f"program {name!r} is not known to guard and not found on PATH")
    else:
        ctx.add(Effect.exec(found, f"{name}: program not analysed, may do anything"))
        ctx.unknown_exec(f"{name}: program not analysed, may do anything")


WALKER = Walker(command=_command, source=_analyse_source)

# The program modules register their handlers on import.
from guard.analysis.shell import builtins, files, git, network_programs, patch, wrappers  # noqa: E402,F401
