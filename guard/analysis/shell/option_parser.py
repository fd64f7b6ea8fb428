"""Option parsing for program handlers, with the semantics of the programs themselves.

A program's options are data: a :class:`Spec` lists **every** option the program
accepts, with its arity and what its value means (a file read, a file written, a
program run...). :meth:`Spec.parse` splits a command line the way GNU
``getopt_long`` does:

* long options may be abbreviated to any unique prefix (``--outp`` is
  ``--output``); an exact name wins over a prefix; a prefix shared by different
  options is ambiguous, and so an error;
* ``--name=value``, or ``--name value`` when the option requires a value; an
  optional value is only ever attached (``--color=auto``, ``-i.bak``);
* short options bundle (``-nrk2`` is ``-n -r -k 2``), and a value may be
  attached (``-ofile``) or the next word (``-o file``);
* ``--`` ends the options; unless the spec says otherwise options may follow
  operands (GNU permutation), so every word is looked at;
* ``-`` alone is an operand.

An option missing from the spec, an ambiguous abbreviation, a value given to an
option that takes none, or a missing value is an *error*: the handler then
counts the command as not read-only. The spec grammar (``opts``) is a
whitespace-separated list of tokens ``NAMES[ARITY][@ROLE]``:

* ``NAMES``: aliases joined by ``|`` (``-o|--output``);
* ``ARITY``: nothing (a flag), ``=`` (a value is required), ``=?`` (an optional,
  attached value), ``=2`` (two values follow, as in ``jq --rawfile NAME FILE``);
* ``ROLE``: ``read`` (the value is a file read), ``write`` (a file written),
  ``exec`` (a program or code run), ``state`` (system or repository state
  changed), ``cwd`` (the working directory changed). No role: the value is data.

``flags`` is shorthand for short options without a value (``flags="abc"``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from guard.analysis.shell.context import Ctx
from guard.analysis.shell.words import Arg

Arity = Literal[0, 1, 2, "?"]
ROLES = frozenset({"", "read", "write", "exec", "state", "cwd"})
#: roles whose presence makes a command not read-only, whatever its value
DANGEROUS = frozenset({"write", "exec", "state", "cwd"})


@dataclass(frozen=True, slots=True)
class Option:
    names: tuple[str, ...]
    arity: Arity
    role: str

    @property
    def name(self) -> str:
        """The name to show: the long one when there is one."""
        return next((n for n in self.names if n.startswith("--")), self.names[0])


@dataclass(slots=True)
class Parsed:
    """A command line split by a :class:`Spec`."""

    #: (option, as written, values)
    opts: list[tuple[Option, str, list[Arg]]] = field(default_factory=list)
    pos: list[Arg] = field(default_factory=list)
    error: str | None = None  # why the line is not understood (unknown option...)
    dynamic: bool = False  # a computed word stood where an option could be

    def has(self, *names: str) -> bool:
        if not self.opts:
            return False
        return any(n in o.names for o, _, _ in self.opts for n in names)

    def values(self, *names: str) -> list[Arg]:
        return [v for o, _, vs in self.opts if any(n in o.names for n in names) for v in vs]

    def roles(self, *roles: str) -> list[tuple[Option, str, list[Arg]]]:
        return [(o, w, vs) for o, w, vs in self.opts if o.role in roles]


def could_be_option(arg: Arg) -> bool:
    """A word whose text is not known may expand to ``-x``: a variable, or a glob
    starting with a pattern character (``*`` can match a file named ``-o...``)."""
    if arg.text is None:
        return not arg.pipe
    return arg.glob and arg.text[:1] in ("*", "?", "[")


class Spec:
    """Every option of one program (see the module docstring for the grammar)."""

    __slots__ = ("abbrev", "dangerous", "exact", "long", "permute", "short", "words")

    def __init__(self, flags: str = "", opts: str = "", *, permute: bool = True,
                 abbrev: bool = True, exact: bool = False) -> None:
        self.short: dict[str, Option] = {}
        self.long: dict[str, Option] = {}
        self.words: dict[str, Option] = {}
        self.permute = permute  # options may follow operands (GNU); False: stop at the first
        self.abbrev = abbrev and not exact  # long options may be abbreviated (getopt_long)
        # exact: each option is a word of its own, exactly as listed (``-L 2``, ``-cols 8``),
        # values are the next words; for programs whose own parsers bundle or attach
        # differently from getopt, only this common form is understood
        self.exact = exact
        for ch in flags:
            self._add(Option((f"-{ch}",), 0, ""))
        for token in opts.split():
            self._add(_option(token, exact))
        self.dangerous = any(o.role in DANGEROUS for o in [*self.short.values(),
                                                           *self.long.values()])

    def _add(self, opt: Option) -> None:
        for n in opt.names:
            if n in self.words:
                raise ValueError(f"option {n} listed twice")
            self.words[n] = opt
            table = self.long if n.startswith("--") else self.short
            key = n[2:] if n.startswith("--") else n[1:]
            if key in table:
                raise ValueError(f"option {n} listed twice")
            table[key] = opt

    def options(self) -> list[Option]:
        seen: dict[int, Option] = {}
        for o in [*self.short.values(), *self.long.values()]:
            seen.setdefault(id(o), o)
        return list(seen.values())

    def resolve_long(self, name: str) -> Option | str:
        """The option ``--name`` means, or why it means none (unknown, ambiguous)."""
        exact = self.long.get(name)
        if exact is not None:
            return exact
        if self.abbrev and name:
            found = {id(o): o for k, o in self.long.items() if k.startswith(name)}
            if len(found) == 1:
                return next(iter(found.values()))
            if len(found) > 1:
                names = ", ".join(sorted(f"--{k}" for k in self.long if k.startswith(name)))
                return f"ambiguous option --{name} (could be {names})"
        return f"unknown option --{name}"

    def parse(self, args: list[Arg]) -> Parsed:
        p = Parsed()
        i = 0
        while i < len(args):
            a = args[i]
            t = a.text
            plain = t is not None and (t[:1] != "-" or t == "-") and not (
                a.glob and t[:1] in ("*", "?", "["))
            # a plain operand (the common case; the checks below would all pass it by),
            # or one that may expand to an option at run time (then the parse is dynamic)
            if plain or t is None or could_be_option(a):
                if not plain:
                    p.dynamic = True
                p.pos.append(a)
                if not self.permute:
                    p.pos.extend(args[i + 1 :])
                    break
                i += 1
                continue
            if t == "--":
                p.pos.extend(args[i + 1 :])
                break
            if self.exact and t.startswith("-") and t != "-":
                found_word = self.words.get(t)
                if found_word is None:
                    p.error = f"unknown option {t} (only the separate-word forms are understood)"
                    return p
                need = {0: 0, 1: 1, 2: 2, "?": 0}[found_word.arity]
                if i + need >= len(args):
                    p.error = f"option {t} needs a value"
                    return p
                p.opts.append((found_word, t, args[i + 1 : i + 1 + need]))
                i += 1 + need
                continue
            if t.startswith("--"):
                name, eq, value = t[2:].partition("=")
                found = self.resolve_long(name)
                if isinstance(found, str):
                    p.error = found
                    return p
                vals: list[Arg] = []
                if found.arity == 0:
                    if eq:
                        p.error = f"option --{name} takes no value"
                        return p
                elif found.arity == "?":
                    if eq:
                        vals.append(Arg(value, a.glob))
                elif eq:
                    vals.append(Arg(value, a.glob))
                    if found.arity == 2:
                        if i + 1 >= len(args):
                            p.error = f"option {found.name} needs two values"
                            return p
                        vals.append(args[i + 1])
                        i += 1
                else:
                    need = 2 if found.arity == 2 else 1
                    if i + need >= len(args):
                        p.error = f"option {found.name} needs a value"
                        return p
                    vals.extend(args[i + 1 : i + 1 + need])
                    i += need
                p.opts.append((found, t, vals))
                i += 1
                continue
            if t.startswith("-") and t != "-":
                j = 1
                while j < len(t):
                    ch = t[j]
                    opt = self.short.get(ch)
                    if opt is None:
                        p.error = f"unknown option -{ch}"
                        return p
                    if opt.arity == 0:
                        p.opts.append((opt, f"-{ch}", []))
                        j += 1
                        continue
                    rest = t[j + 1 :]
                    vals = []
                    if opt.arity == "?":
                        if rest:
                            vals.append(Arg(rest, a.glob))
                    elif rest:
                        vals.append(Arg(rest, a.glob))
                        if opt.arity == 2:
                            if i + 1 >= len(args):
                                p.error = f"option -{ch} needs two values"
                                return p
                            vals.append(args[i + 1])
                            i += 1
                    else:
                        need = 2 if opt.arity == 2 else 1
                        if i + need >= len(args):
                            p.error = f"option -{ch} needs a value"
                            return p
                        vals.extend(args[i + 1 : i + 1 + need])
                        i += need
                    p.opts.append((opt, f"-{ch}", vals))
                    break
                i += 1
                continue
            p.pos.append(a)
            if not self.permute:
                p.pos.extend(args[i + 1 :])
                break
            i += 1
        return p


def _option(token: str, exact: bool = False) -> Option:
    names_part, _, role = token.partition("@")
    arity: Arity = 0
    for suffix, value in (("=?", "?"), ("=2", 2), ("=", 1)):
        if names_part.endswith(suffix):
            names_part = names_part[: -len(suffix)]
            arity = value  # type: ignore[assignment]
            break
    names = tuple(names_part.split("|"))
    if role not in ROLES:
        raise ValueError(f"option {token}: unknown role {role!r}")
    for n in names:
        if exact and len(n) > 1 and n[0] == "-":
            continue
        if not (n.startswith("--") and len(n) > 2) and not (len(n) == 2 and n[0] == "-"):
            raise ValueError(f"option {token}: bad name {n!r}")
    return Option(names, arity, role)


def apply(ctx: Ctx, name: str, spec: Spec, p: Parsed) -> bool:
    """The effects of the options ``p`` holds; False (and reported) when the command is
    not read-only: an option error, a computed word where a dangerous option could be,
    or an option that runs code or changes state."""
    if p.error is not None:
        ctx.not_read_only(f"{name}: {p.error}; guard cannot tell what it does")
        return False
    if p.dynamic and spec.dangerous:
        ctx.not_read_only(f"{name} with a computed argument: it could be an option that writes"
                          " or runs a program")
        return False
    ok = True
    for opt, written, vals in p.opts:
        if opt.role == "read":
            for v in vals[-1:]:
                if v.text != "-":
                    ctx.read(v, f"{name} {opt.name} reads it")
        elif opt.role == "write":
            if not vals:
                ctx.unknown_write(f"{name} {written} writes a file")
            for v in vals:
                ctx.write(v, f"{name} {written} writes it")
        elif opt.role == "exec":
            ctx.not_read_only(f"{name} {written} runs a program")
            ok = False
        elif opt.role == "state":
            ctx.not_read_only(f"{name} {written} changes system or repository state")
            ok = False
    return ok


# --------------------------------------------------------------------------- legacy splitting


@dataclass
class Loose:
    """A getopt-style split that keeps unknown options as flags (for handlers of programs
    that are never read-only anyway: their effects are writes whatever the options)."""

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
) -> Loose:
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
    return Loose(opts, pos, dynamic)
