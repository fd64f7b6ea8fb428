"""Program knowledge as data: one table per family of programs.

Each table maps a program name to a :class:`~guard.analysis.shell.option_parser.Spec` that
lists every option the program accepts (checked against the ``--help`` and manual
pages of the GNU/Debian programs), with arity and role. A program or an option that
is not in a table is not read-only. See docs/tools.md for how to add a program.
"""
