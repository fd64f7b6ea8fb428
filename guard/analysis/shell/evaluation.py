"""Bash constructs that evaluate code hidden in data: arithmetic and array subscripts.

Bash evaluates arithmetic in ``$((...))``, ``((...))``, ``for ((...))``, ``let``,
the operands of ``[[ ... -eq ... ]]``, the offset and length of ``${x:off:len}``,
indexed-array subscripts wherever a name is used, and the values of integer
variables (``declare -i``). Arithmetic on a *name* evaluates that variable's value
as an expression in turn, and a subscript inside it may hold ``$(command)``:
``x='a[$(touch f)]'; echo $((x))`` runs ``touch``. The same holds for every builtin
that takes a variable *name* as an argument (``declare``, ``unset``, ``read``,
``printf -v``, ``wait -p``, ``test -v`` ...): a name with a subscript is evaluated.
``${x@P}`` expands ``x``'s value like a prompt, running its command substitutions.

So: such a construct is harmless only when its operands are literal (numbers, plain
identifiers, ``name[digits]``); anything else counts as running unknown code.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.words import clip, text_of, word_arg

#: a variable name bash will not evaluate: an identifier, optionally with a literal index
SAFE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[(\d+|@|\*)\])?")
_LITERAL_NUMBER = re.compile(r"\s*[-+]?\d+\s*")
ARITH_TEST_OPS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
#: inside arithmetic, a letter, quote, $ or ` means a name or an expansion to evaluate
_EVALUATES = re.compile(r"[A-Za-z_$`'\"\\]")
#: code the grammar leaves as text inside ``${...}``: backticks, ``$(``, ``$[``, ``<(``, ``>(``
_HIDDEN_CODE = re.compile(r"`|\$\(|\$\[|[<>]\(")
#: leaves of ``${...}`` that may hold such text; a raw_string too: inside double quotes,
#: ``"${x:-'`cmd`'}"`` keeps the single quotes as characters and runs ``cmd``
_TEXT_LEAVES = frozenset({"word", "regex", "string_content", "extglob_pattern", "raw_string"})


def check_name(ctx: Ctx, name: str | None, how: str) -> bool:
    """A word used as a variable name: literal identifiers only. False (and an unknown
    exec) when bash would evaluate it."""
    if name is None or not SAFE_NAME.fullmatch(name):
        ctx.unknown_exec(f"{how} {clip(name or '<computed name>')}: bash evaluates the name"
                         " (an array subscript can run commands)")
        if name is not None and "[" in name:
            # the subscript is expanded first: what its substitutions run is analysed too
            ctx.nested(": " + name[name.index("[") + 1 :].rstrip("]"), "an evaluated subscript")
        return False
    ctx.taint_if_dangerous(name.split("[", 1)[0])
    return True


def check_assignment_word(ctx: Ctx, text: str | None, how: str) -> None:
    """``NAME=VALUE`` given to declare/export/local... as a word: the name is checked and
    a value starting with ``(`` is a compound assignment bash parses as code."""
    if text is None:
        check_name(ctx, None, how)
        return
    name, eq, value = text.partition("=")
    if name.endswith("+"):
        name = name[:-1]
    if check_name(ctx, name, how) and eq and value.lstrip().startswith("("):
        ctx.unknown_exec(f"{how} {clip(text)}: a quoted compound assignment is parsed as code")


def arithmetic(ctx: Ctx, node: Node, what: str) -> None:
    """``node`` is evaluated as arithmetic: unknown exec unless it holds only numbers."""
    if _EVALUATES.search(text_of(node)):
        ctx.unknown_exec(f"{what} evaluates names, whose values can run commands"
                         f" ({clip(text_of(node))})")


def literal_number(node: Node) -> bool:
    arg = word_arg(node)
    return arg.literal is not None and _LITERAL_NUMBER.fullmatch(arg.literal) is not None


def subscript(ctx: Ctx, node: Node) -> None:
    """``a[INDEX]``: the index is arithmetic (indexed arrays) or expanded (associative)."""
    index = node.child_by_field_name("index")
    if index is not None and not re.fullmatch(r"\d+|@|\*", text_of(index)):
        arithmetic(ctx, index, "an array subscript")


def expansion(ctx: Ctx, node: Node) -> None:
    """``${...}``: indirection, prompt expansion and substring offsets evaluate code."""
    kids = node.children
    types = [c.type for c in kids]
    for leaf in _text_leaves(node):
        text = text_of(leaf)
        if _HIDDEN_CODE.search(text):
            # `${x:=`cmd`}`, `${x#$(cmd)}`: the grammar keeps the operand as text, bash
            # runs it. Unknown code, and what the text runs is analysed as well.
            ctx.unknown_exec(f"a substitution inside ${{...}} runs code: {clip(text)}")
            ctx.nested(": " + text, "a substitution inside ${...}")
    if "=" in types or ":=" in types:  # ${NAME:=value} assigns NAME
        for c in kids:
            if c.type == "variable_name":
                ctx.taint_if_dangerous(text_of(c))
    if "@" in types or "@" in text_of(node):
        text = text_of(node)
        if re.search(r"@\s*\w*P", text):
            # a transformation letter the grammar may not isolate counts too
            ctx.not_read_only("${...@P} expands a value like a prompt, running its command"
                              " substitutions")
    if "!" in types:
        ctx.unknown_exec("indirect expansion ${!...} evaluates the name it finds (array"
                         " subscripts run commands)")
    for i, c in enumerate(kids):
        if c.type == ":":  # ${x:offset:length}: both are arithmetic
            for operand in kids[i + 1 :]:
                if operand.is_named and not literal_number(operand):
                    arithmetic(ctx, operand, "a substring offset")


def _text_leaves(node: Node) -> list[Node]:
    out: list[Node] = []
    stack = list(node.named_children)
    while stack:
        child = stack.pop()
        if child.type in _TEXT_LEAVES and child.named_child_count == 0:
            out.append(child)
        else:
            stack.extend(child.named_children)
    return out


def test_expression(ctx: Ctx, node: Node) -> None:
    """Inside ``[[ ]]``: arithmetic comparisons and ``-v``/``-R`` evaluate their operands."""
    ops = [text_of(c) for c in node.children if c.type == "test_operator"]
    if node.type == "binary_expression" and any(op in ARITH_TEST_OPS for op in ops):
        for operand in node.named_children:
            if operand.type != "test_operator" and not literal_number(operand):
                ctx.unknown_exec(f"[[ {' '.join(ops)} ]] evaluates its operands as arithmetic"
                                 f" ({clip(text_of(operand))})")
    elif node.type == "unary_expression" and any(op in ("-v", "-R") for op in ops):
        for operand in node.named_children:
            if operand.type != "test_operator":
                check_name(ctx, word_arg(operand).literal, f"[[ {ops[0]} ]] of")
