"""Option parsing for program handlers."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from guard.tools.shell.words import Arg


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

