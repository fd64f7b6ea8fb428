"""Compiled gitignore matching over absolute paths.

Each pattern list of a policy is a gitignore file: same syntax, same meaning,
``!`` for exceptions, last match wins, and a path inside an excluded
directory stays excluded (git does not descend into it, so an exception
cannot re-include it). ``git check-ignore --no-index`` is the oracle the
tests compare against.

Three modules, read in this order:

- :mod:`guard.match.syntax`: one line parsed into a :class:`Pattern`, its glob
  translated to a regex (the one tokenizer of globs);
- :mod:`guard.match.reference`: the pure-Python engine, the reference
  (:class:`RuleSet`, :class:`CompiledList`);
- :mod:`guard.match.re2_engine`: the compiled engine used where the optional
  google-re2 is installed; it hands back to the reference engine whatever it
  cannot settle.

This package re-exports their public surface, so callers import from ``guard.match``.
"""

from guard.match.re2_engine import DEFAULT_ENGINE, ENGINES, engine_note, glob_to_re2
from guard.match.reference import CompiledList, RuleSet, literal_suffix
from guard.match.syntax import (
    ANY,
    CLASS,
    DSTAR_DIR,
    DSTAR_END,
    LIT,
    STAR,
    GlobToken,
    Pattern,
    PatternError,
    PerList,
    Source,
    as_bytes,
    glob_to_regex,
    glob_tokens,
    parse_pattern,
)

__all__ = [
    "ANY",
    "CLASS",
    "DEFAULT_ENGINE",
    "DSTAR_DIR",
    "DSTAR_END",
    "ENGINES",
    "LIT",
    "STAR",
    "CompiledList",
    "GlobToken",
    "Pattern",
    "PatternError",
    "PerList",
    "RuleSet",
    "Source",
    "as_bytes",
    "engine_note",
    "glob_to_re2",
    "glob_to_regex",
    "glob_tokens",
    "literal_suffix",
    "parse_pattern",
]
