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

Layout: :mod:`.words` (words -> :class:`Arg`), :mod:`.context` (:class:`Ctx`, the
seam between the walker and program handlers), :mod:`.walker` (bash constructs),
:mod:`.option_parser` (option parsing; the option tables are data in :mod:`.tables`),
:mod:`.registry` (program name -> handler), and one module per family of programs
(:mod:`.files`, :mod:`.git`, :mod:`.network_programs`, :mod:`.wrappers`, :mod:`.builtins`,
:mod:`.patch`); :mod:`.evaluation` (code bash evaluates inside data: arithmetic,
subscripts) and :mod:`.sedscript` (sed scripts in sed's own grammar) serve the walker and
the handlers. :mod:`.grammar` is guard's own shell
grammar (bash, dash and guard read its sentences alike), which hosts that can only allow
or refuse a command require in plan mode.
"""

from __future__ import annotations

from guard.analysis.shell.patch import parse_patch
from guard.analysis.shell.walker import PARSER, analyse, analyse_argv

_PARSER = PARSER  # the benchmark times the bare parse with it

__all__ = ["PARSER", "analyse", "analyse_argv", "parse_patch"]
