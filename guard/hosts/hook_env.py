"""The hosts' environment variables, as the hook client reads them (generated).

What the host records say in ``environment`` (guard/hosts/<host>/__init__.py), gathered
for :mod:`guard.hooks.hookclient`, which loads this file by its path (it imports
nothing, so the client does not import guard to read it). tests/test_host_env.py
checks it against the registry; ``python tests/test_host_env.py`` writes it again.
"""

#: whole names
NAMES = ("CLAUDE_CODE_ENTRYPOINT",)
#: prefixes
PREFIXES = ("CODEX_", "GEMINI_")
