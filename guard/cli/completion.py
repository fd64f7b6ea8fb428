"""TAB completion, answered before typer loads: commands, options and their values
(hosts, the policy's agents, this worktree's sessions, lint rule codes, built-in policies).

The scripts ``guard --install-completion`` installs (typer's, for bash, zsh, fish and
PowerShell) run ``guard`` with ``_GUARD_COMPLETE=complete_SHELL`` and the words typed so
far in the environment; :func:`guard.cli.main` hands that to :func:`answer` first
thing, which reads the words as click's completion does, looks them up in the table
written from typer's application (guard/cli/completion.json: under ``commands``, each
command path, ``""`` for guard itself, as [short help, subcommands, options, arguments];
an option as [names, takes a value, may repeat, values, help], an argument as [nargs,
values], values being a name of :data:`SOURCES`, a list of choices, or null for the
shell's own file completion; ``hosts`` and ``rules`` hold guard's hosts and lint codes;
tests/test_cli_completion.py keeps it equal to typer's application and rewrites it) and
prints the answer in the format that shell's script reads. The value sources below are
also the ``autocompletion`` of the typer options, so both paths offer the same. Each
reads as little as it can (a directory listing, a TOML file); a failure offers nothing
rather than print an error into the shell.
"""

# Lazy imports: each source of values only when its option is completed (TAB speed).

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (TAB speed)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

_VCS_MARKERS = (".git", ".hg", ".jj", ".svn")  # guard.paths.VCS_MARKERS (a test checks)
_HERE = os.path.dirname(os.path.realpath(__file__))
_BUILTINS = os.path.join(os.path.dirname(_HERE), "policies")
_TABLE = os.path.join(_HERE, "completion.json")


def _starting(values: list[str] | tuple[str, ...], incomplete: str) -> list[str]:
    return [v for v in values if v.startswith(incomplete)]


def table() -> dict[str, Any]:
    """guard/cli/completion.json: ``commands`` (see above), ``hosts`` (guard.hooks.HOSTS),
    ``rules`` (the lint rule codes) and ``builtin_agents`` (each built-in policy's agents,
    its ``extends`` included), read once."""
    if not _LOADED:
        import json

        with open(_TABLE, encoding="utf-8") as handle:
            _LOADED.update(json.load(handle))
    return _LOADED


_LOADED: dict[str, Any] = {}


def hosts(incomplete: str) -> list[str]:
    return _starting(table()["hosts"], incomplete)


def _worktree() -> str | None:
    """guard.paths.find_worktree of the current directory, without importing guard.paths."""
    candidate = os.path.realpath(os.getcwd())
    while True:
        if any(os.path.lexists(os.path.join(candidate, m)) for m in _VCS_MARKERS):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return None
        candidate = parent


def _agents_of(spec: str, base: str, seen: set[str]) -> list[str]:
    """The agent names of a policy file and its ``extends`` chain, in the merged order."""
    if spec.startswith("builtin:"):
        known = table().get("builtin_agents", {}).get(spec[len("builtin:"):])
        if isinstance(known, list):  # written with the table: no TOML parser to load
            return [str(n) for n in known]
    import json
    import tomllib

    if spec.startswith("builtin:"):
        path = os.path.join(_BUILTINS, f"{spec[len('builtin:'):]}.toml")
    else:
        path = os.path.join(base, os.path.expanduser(spec))
    path = os.path.realpath(path)
    if path in seen:
        raise ValueError(f"extends cycle at {path}")
    seen.add(path)
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    data: Any = json.loads(text) if path.endswith(".json") else tomllib.loads(text)
    parents = data.get("extends", [])
    names: list[str] = []
    for parent in [parents] if isinstance(parents, str) else parents:
        names += _agents_of(parent, os.path.dirname(path), seen)
    return names + list(data.get("agents", {}))


def agents(incomplete: str) -> list[str]:
    """The agents of the policy guard uses here ($GUARD_POLICY, the worktree's
    .openoxide/policy.toml, else builtin:default), read without validating it."""
    spec = os.environ.get("GUARD_POLICY") or ""
    if not spec:
        wt = _worktree()
        found = os.path.join(wt, ".openoxide", "policy.toml") if wt is not None else ""
        spec = found if found and os.path.isfile(found) else "builtin:default"
    try:
        names = _agents_of(spec, os.path.realpath(os.getcwd()), set())
    except Exception:  # a broken policy: nothing to offer (the command itself will say)
        return []
    return _starting(list(dict.fromkeys(names)), incomplete)


def sessions(incomplete: str) -> list[str]:
    wt = _worktree()
    if wt is not None:  # guard.planning._vocabulary.sessions_dir, as it finds it
        directory = os.path.join(wt, ".openoxide", "sessions")
    else:  # the data directory's: platformdirs
        from guard.planning._vocabulary import sessions_dir

        directory = str(sessions_dir(os.getcwd()))
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    ids = sorted(n[: -len(".json")] for n in names
                 if n.endswith(".json") and not n.startswith("."))
    return _starting(ids, incomplete)


def rule_codes(incomplete: str) -> list[str]:
    return _starting(table()["rules"], incomplete.upper())


def policies(incomplete: str) -> list[str]:
    """The built-in policies (``guard policy show NAME``)."""
    try:
        names = sorted(n[:-5] for n in os.listdir(_BUILTINS) if n.endswith(".toml"))
    except OSError:
        return []
    return _starting(names, incomplete)


#: value sources by the name the completion table uses
SOURCES: dict[str, Callable[[str], list[str]]] = {
    "hosts": hosts, "agents": agents, "sessions": sessions, "rules": rule_codes,
    "policies": policies,
}  # fmt: skip


# -- the protocol ---------------------------------------------------------------------------


def run() -> None:
    """Answer the completion request in this process's environment and exit; return when
    it is not one :func:`answer` reads (typer's completion then answers)."""
    try:
        said = answer(os.environ)
    except Exception:  # never a traceback into the shell: typer's completion answers
        return
    if said is not None:
        sys.stdout.write(said[0])
        sys.stdout.flush()
        raise SystemExit(said[1])

Item = tuple[str, str]  # (value, help)


def _split(text: str) -> list[str]:
    """Words as click's ``split_arg_string`` reads them (an unclosed quote ends the text)."""
    if not any(c in "\"'\\" or (c.isspace() and c not in " \t\r\n") for c in text):
        return text.split()  # no quoting: shlex would split it the same (without its import)
    import shlex

    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[str] = []
    try:
        for token in lex:
            out.append(token)
    except ValueError:
        out.append(lex.token)
    return out


def _option(command: Any, name: str) -> Any:
    for option in command[2]:
        if name in option[0]:
            return option
    return None


def _values(source: Any, incomplete: str) -> list[Item]:
    if source is None:
        return []
    if isinstance(source, list | tuple):
        return [(v, "") for v in source if v.startswith(incomplete)]
    return [(v, "") for v in SOURCES[source](incomplete)]


def complete(args: list[str], incomplete: str, table: Mapping[str, Any]) -> list[Item]:
    """What click's completion offers after the words ``args`` for ``incomplete``."""
    path, used, given, pending, dashdash = "", set[str](), 0, None, False
    for word in args:
        command = table[path]
        if pending is not None:  # the value of the option before
            pending = None
            continue
        if word == "--":
            dashdash = True
            continue
        if not dashdash and word.startswith("-") and word != "-":
            name, eq, _ = word.partition("=")
            option = _option(command, name)
            if option is not None:
                used.add(option[0][0])
                pending = option if option[1] and not eq else None
            continue
        if command[1]:  # a group: the word names its command (or none guard knows)
            if word not in command[1]:
                break
            path, used, given = f"{path} {word}".strip(), set(), 0
            continue
        given += 1
    command = table[path]
    if incomplete == "=":
        incomplete = ""
    elif "=" in incomplete and incomplete.startswith("-"):
        name, _, incomplete = incomplete.partition("=")
        pending = _option(command, name)
    if not dashdash and incomplete.startswith("-"):
        return [(name, option[4]) for option in command[2]
                if option[2] or option[0][0] not in used
                for name in option[0] if name.startswith(incomplete)]
    if pending is not None:
        return _values(pending[3], incomplete)
    if command[1]:
        return [(name, table[f"{path} {name}".strip()][0]) for name in command[1]
                if name.startswith(incomplete)]
    for nargs, source in command[3]:
        if nargs == -1 or given < nargs:
            return _values(source, incomplete)
        given -= nargs
    return []


def _zsh_escape(s: str) -> str:
    return (s.replace('"', '""').replace("'", "''").replace("$", "\\$").replace("`", "\\`")
            .replace(":", r"\\:"))  # fmt: skip


def answer(environ: Mapping[str, str]) -> tuple[str, int] | None:
    """(what to print, exit code) for a completion request in ``environ``; None when it is
    not one this reads (typer's completion then answers)."""
    instruction, _, shell = environ.get("_GUARD_COMPLETE", "").partition("_")
    if instruction != "complete":
        return None
    try:
        COMMANDS: dict[str, Any] = table()["commands"]
    except (OSError, ValueError, KeyError):
        return None
    if shell == "bash":
        words = _split(environ.get("COMP_WORDS", ""))
        try:
            cword = int(environ.get("COMP_CWORD", ""))
        except ValueError:
            return None
        items = complete(words[1:cword], words[cword] if cword < len(words) else "", COMMANDS)
        return "\n".join(v for v, _ in items) + "\n", 0
    if shell not in ("zsh", "fish", "powershell", "pwsh"):
        return None
    typed = environ.get("_TYPER_COMPLETE_ARGS", "")
    words = _split(typed)[1:]
    if shell in ("powershell", "pwsh"):
        incomplete = environ.get("_TYPER_COMPLETE_WORD_TO_COMPLETE", "")
        args = words[:-1] if incomplete else words
    elif words and not typed.endswith(" "):
        args, incomplete = words[:-1], words[-1]
    else:
        args, incomplete = words, ""
    items = complete(args, incomplete, COMMANDS)
    if shell == "zsh":
        if not items:
            return "_files\n", 0
        said = "\n".join(f'"{_zsh_escape(v)}":"{_zsh_escape(h)}"' if h else f'"{_zsh_escape(v)}"'
                         for v, h in items)  # fmt: skip
        return f"_arguments '*: :(({said}))'\n", 0
    if shell == "fish":
        if environ.get("_TYPER_COMPLETE_FISH_ACTION", "") == "is-args":
            return "", 0 if items else 1
        return "\n".join(f"{v}\t{' '.join(h.split())}" if h else v for v, h in items) + "\n", 0
    return "\n".join(f"{v}:::{h or ' '}" for v, h in items) + "\n", 0
