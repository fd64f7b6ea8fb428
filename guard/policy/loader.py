"""Reading policy files: TOML or JSON, ``extends`` chains, located errors.

Every problem becomes one line ``FILE:LINE: key.path[i]: what is wrong and how
to fix it`` inside a :class:`PolicyError`; nothing here prints a traceback.
"""

# Lazy imports: pydantic and the schema only to validate: hooks use the cache (start-up speed);
# difflib only for an unknown key's hint; tomllib only for a TOML text not parsed before.

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from guard.effects import GuardError, did_you_mean
from guard.match import Pattern, PatternError, Source, parse_pattern
from guard.network import parse_network_pattern, resolve_problem
from guard.paths import ROOT_NAMES
from guard.policy import valid
from guard.policy.source_lines import line_of
from guard.policy.valid import Policy
from guard.record import Record
from guard.sha import sha256

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

BUILTIN_PREFIX = "builtin:"
Loc = tuple[str | int, ...]
#: The pattern lists of an agent's network rules, in checking order.
NETWORK_LISTS = ("deny", "ask", "allow", "model_api")


_WHERE = re.compile(r"^(?P<file>.+?):(?P<line>\d+): ")


class PolicyError(GuardError):
    """One or more problems in policy files, one located line each: in the order of the
    files as first named, then by line (a problem without a line keeps its place)."""

    def __init__(self, problems: list[str]) -> None:
        files: dict[str, int] = {}
        keys: list[tuple[int, int]] = []
        for p in problems:
            m = _WHERE.match(p)
            f = m.group("file") if m else ""
            keys.append((files.setdefault(f, len(files)), int(m.group("line")) if m else 0))
        order = sorted(range(len(problems)), key=lambda i: keys[i])
        self.problems = [problems[i] for i in order]
        super().__init__("\n".join(self.problems))


class LoadedPolicy(Record, frozen=False):
    """A validated policy with the provenance of every key."""

    __slots__ = ("digest", "files", "model", "name", "paths", "provenance", "texts", "warnings")
    __match_args__ = ("name", "model", "files", "paths", "texts", "provenance", "warnings",
                      "digest")  # fmt: skip
    _unshown = frozenset({"texts", "provenance"})

    name: str  # how the top file is shown (path or builtin:NAME)
    model: Policy  # what pydantic accepted (guard/policy/valid.py)
    files: list[str]  # every file of the chain, parents first
    paths: list[Path]  # real paths of the files read (for protection)
    texts: dict[str, str]
    provenance: dict[Loc, str]
    #: located lines about patterns that load but can never match (lint rule GL101)
    warnings: list[str]
    #: SHA-256 of the merged policy (what the files say together, wherever they are)
    digest: str

    def __init__(
        self,
        name: str,
        model: Policy,
        files: list[str],
        paths: list[Path],
        texts: dict[str, str],
        provenance: dict[Loc, str],
        warnings: list[str] | None = None,
        digest: str = "",
    ) -> None:
        self.name = name
        self.model = model
        self.files = files
        self.paths = paths
        self.texts = texts
        self.provenance = provenance
        self.warnings = [] if warnings is None else warnings
        self.digest = digest

    def file_of(self, loc: Loc) -> str:
        for n in range(len(loc), -1, -1):
            f = self.provenance.get(loc[:n])
            if f is not None:
                return f
        return self.name

    def locate(self, loc: Loc) -> tuple[str, int]:
        f = self.file_of(loc)
        return f, locate_line(self.texts.get(f, ""), loc)

    def source(self, loc: Loc) -> Source:
        f, line = self.locate(loc)
        key = ".".join(str(k) for k in loc[:-1])
        idx = loc[-1]
        return Source(f, line, key, idx if isinstance(idx, int) else 0)


#: The shipped policies, in the package (a plain path: ``importlib.resources`` would import
#: zipfile on every ``guard run`` start for a package that is never zipped).
BUILTINS = Path(__file__).parent.parent / "policies"


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in BUILTINS.iterdir() if p.name.endswith(".toml"))


def _read(spec: str, base: Path | None, where: str) -> tuple[str, str, Path | None]:
    """(display name, text, real path or None for built-ins)."""
    if spec.startswith(BUILTIN_PREFIX):
        name = spec[len(BUILTIN_PREFIX) :]
        res = BUILTINS / f"{name}.toml"
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or not res.is_file():
            hint = did_you_mean(name, builtin_names())
            raise PolicyError(
                [
                    f"{where}: no built-in policy {name!r}; {hint}built-ins:"
                    f" {', '.join(builtin_names())}"
                ]
            )
        return spec, res.read_text(encoding="utf-8"), None
    path = Path(spec).expanduser()
    if base is not None and not path.is_absolute():
        path = base / path
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PolicyError([f"{where}: policy file {str(path)!r} does not exist"]) from None
    except IsADirectoryError:
        raise PolicyError([f"{where}: {str(path)!r} is a directory, not a policy file"]) from None
    except UnicodeDecodeError as exc:
        raise PolicyError([f"{path}:1: not UTF-8 text ({exc.reason}); save it as UTF-8"]) from None
    except OSError as exc:
        raise PolicyError([f"{where}: cannot read {str(path)!r}: {exc.strerror}"]) from None
    return str(path), text, Path(os.path.realpath(path))


def _parse(name: str, text: str) -> dict[str, Any]:
    is_json = name.endswith(".json") or (not name.endswith(".toml") and text.lstrip()[:1] == "{")
    if is_json:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyError(
                [f"{name}:{exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"]
            ) from None
        if not isinstance(data, dict):
            raise PolicyError([f"{name}:1: a policy must be a JSON object"])
        return data
    parsed = valid.parsed_toml(text)  # the same text parsed before: no tomllib
    if parsed is not None:
        return parsed
    import tomllib

    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = m.group(1) if m else "1"
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        raise PolicyError([f"{name}:{line}: invalid TOML: {msg}"]) from None
    valid.store_toml(text, parsed)
    return parsed


def _merge(
    dst: dict[str, Any], src: dict[str, Any], prov: dict[Loc, str], name: str, loc: Loc
) -> None:
    for key, value in src.items():
        here = (*loc, key)
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _merge(dst[key], value, prov, name, here)
        else:
            dst[key] = _copy(value)
            for k in [k for k in prov if k[: len(here)] == here]:
                del prov[k]
            prov[here] = name
            if isinstance(value, dict):
                _mark(value, prov, name, here)


def _mark(value: dict[str, Any], prov: dict[Loc, str], name: str, loc: Loc) -> None:
    for key, sub in value.items():
        prov[(*loc, key)] = name
        if isinstance(sub, dict):
            _mark(sub, prov, name, (*loc, key))


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def load_policy(spec: str | Path) -> LoadedPolicy:
    """Load ``spec`` (a path or ``builtin:NAME``) with its extends chain."""
    merged: dict[str, Any] = {}
    prov: dict[Loc, str] = {}
    texts: dict[str, str] = {}
    files: list[str] = []
    paths: list[Path] = []
    problems: list[str] = []  # every problem is reported together, a broken extends too
    broken: list[str] = []  # parents that did not load
    top = _load_into(
        str(spec), None, "policy", merged, prov, texts, files, paths, [], problems, broken
    )
    merged.pop("extends", None)
    merged["version"] = 1
    loaded = LoadedPolicy(top, Policy.empty(), files, paths, texts, prov, digest=digest_of(merged))
    key = valid.cache_key(merged) if not problems else None
    hit = valid.cached(key) if key is not None else None
    try:
        # a file that did not load may hold the keys the others lack: no "missing" then
        loaded.model = hit if hit is not None else _validate(
            loaded, merged, key, missing=not broken
        )
    except PolicyError as exc:
        raise PolicyError([*problems, *exc.problems]) from None
    problems += _egress_problems(loaded)
    for agent_name, agent in loaded.model.agents.items():
        if agent_name == "plan" and agent.mode != "plan":
            problems.append(_located(loaded, ("agents", agent_name, "mode"), (
                f"the agent named plan is declared mode = {agent.mode!r}, but `guard run`,"
                " installed hooks and users mean plan mode by it; declare mode = \"plan\","
                " or give this build agent another name"
            )))  # fmt: skip
        for kind in ("read", "write", "delete", "exec", "network"):
            rules = getattr(agent, kind)
            lists = NETWORK_LISTS if kind == "network" else ("deny", "ask", "allow")
            for list_name in lists:
                for i, text in enumerate(getattr(rules, list_name)):
                    loc: Loc = ("agents", agent_name, kind, list_name, i)
                    try:
                        if kind == "network":
                            p = parse_network_pattern(text)
                        else:
                            p = parse_pattern(text)
                    except PatternError as exc:
                        fix = "" if kind == "network" else "; remove the character"
                        problems.append(_located(loaded, loc, f"{exc}{fix}"))
                        continue
                    never = never_match_message(p) if p is not None else None
                    if never is not None:
                        loaded.warnings.append(
                            _located(loaded, loc, f"{never}; fix the glob or remove it (GL101)")
                        )
                    if p is not None and p.root not in ROOT_NAMES and p.root != "/":
                        problems.append(
                            _located(
                                loaded,
                                loc,
                                f"unknown root {{{p.root}}} in {text!r}; use one of "
                                + ", ".join("{" + r + "}" for r in ROOT_NAMES)
                                + " or //absolute/path",
                            )
                        )
        for key in ("writable", "sockets"):
            for i, text in enumerate(getattr(agent.sandbox, key)):
                m = re.match(r"^\{([a-z]+)\}", text)
                if m and m.group(1) not in ROOT_NAMES:
                    problems.append(
                        _located(
                            loaded,
                            ("agents", agent_name, "sandbox", key, i),
                            f"unknown root {{{m.group(1)}}}; use one of "
                            + ", ".join("{" + r + "}" for r in ROOT_NAMES)
                            + " or //absolute/path",
                        )
                    )
    if problems:
        raise PolicyError(problems)
    return loaded


def _egress_problems(loaded: LoadedPolicy) -> list[str]:
    """Located problems of ``[egress]``: each resolve entry HOST[:PORT] = ADDRESS[:PORT]."""
    out = []
    for name, address in loaded.model.egress.resolve.items():
        problem = resolve_problem(name, address)
        if problem is not None:
            out.append(_located(loaded, ("egress", "resolve", name), problem))
    return out


def digest_of(merged: dict[str, Any]) -> str:
    """SHA-256 over a merged policy as canonical JSON (key order kept: it carries meaning,
    the first plan agent is the one a policy lists first)."""
    text = json.dumps(merged, ensure_ascii=False, separators=(",", ":"), default=str)
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _validate(
    loaded: LoadedPolicy, merged: dict[str, Any], key: str | None, *, missing: bool = True
) -> Policy:
    """pydantic's verdict on ``merged``; what it accepts is cached under ``key``.
    ``missing``: report missing keys (not when a file of the chain did not load)."""
    from pydantic import ValidationError

    from guard.policy.schema import PolicyFile

    try:
        model = PolicyFile.model_validate(merged)
    except ValidationError as exc:
        errors = [e for e in exc.errors() if missing or e["type"] != "missing"]
        raise PolicyError([_format_error(loaded, err) for err in errors]) from None
    dump = model.model_dump(mode="json")
    policy = valid.from_dump(dump)
    if key is not None:
        valid.store(key, dump)
    return policy


def _load_into(
    spec: str,
    base: Path | None,
    where: str,
    merged: dict[str, Any],
    prov: dict[Loc, str],
    texts: dict[str, str],
    files: list[str],
    paths: list[Path],
    stack: list[str],
    problems: list[str],
    broken: list[str],
) -> str:
    """Merge ``spec`` and its parents into ``merged``; a file that cannot be read or
    parsed raises, every other problem (a broken parent included) goes to ``problems``."""
    name, text, real = _read(spec, base, where)
    key = str(real) if real is not None else name
    if key in stack:
        chain = " -> ".join([*stack, key])
        raise PolicyError([f"{name}:1: extends: cycle {chain}; remove one of the extends entries"])
    raw = _parse(name, text)
    texts[name] = text
    version = raw.get("version")
    if version is None:
        problems.append(f"{name}:1: version: missing; add `version = 1` at the top")
    elif version != 1:
        line = locate_line(text, ("version",))
        problems.append(f"{name}:{line}: version: expected 1, got {version!r}; set `version = 1`")
    extends = raw.get("extends", [])
    if isinstance(extends, str):
        extends = [extends]
        raw["extends"] = extends
    if not isinstance(extends, list) or not all(isinstance(e, str) for e in extends):
        line = locate_line(text, ("extends",))
        problems.append(f"{name}:{line}: extends: expected a list of paths or builtin:NAME")
        extends = raw["extends"] = []
    parent_dir = real.parent if real is not None else None
    for i, parent in enumerate(extends):
        line = locate_line(text, ("extends", i))
        try:
            _load_into(
                parent,
                parent_dir,
                f"{name}:{line}: extends[{i}]",
                merged,
                prov,
                texts,
                files,
                paths,
                [*stack, key],
                problems,
                broken,
            )
        except PolicyError as exc:
            problems.extend(exc.problems)
            broken.append(parent)
    _merge(merged, raw, prov, name, ())
    files.append(name)
    if real is not None:
        paths.append(real)
    return name


def unchanged(loaded: LoadedPolicy) -> bool:
    """Every file ``loaded`` was built from still reads the same, at the same real path.

    With the same texts and real paths, the ``extends`` chain resolves to the same
    files, so loading again would give the same policy. Any error reading counts as
    changed (the caller then loads again and reports it).
    """
    real = iter(loaded.paths)
    for name in loaded.files:
        try:
            if name.startswith(BUILTIN_PREFIX):
                _, text, _ = _read(name, None, "policy")
            else:
                text = Path(name).read_text(encoding="utf-8")
                if Path(os.path.realpath(name)) != next(real, None):
                    return False
        except (OSError, ValueError, PolicyError):
            return False
        if text != loaded.texts.get(name):
            return False
    return next(real, None) is None


def never_match_message(p: Pattern) -> str | None:
    """Why pattern ``p`` can never match any path, or None (lint rule GL101's check)."""
    if p.problem is None:
        return None
    if p.problem.startswith("empty"):
        return f"pattern {p.text!r} can never match: {p.problem}"
    return f"pattern {p.text!r} can never match: it {p.problem}"


def _located(loaded: LoadedPolicy, loc: Loc, message: str) -> str:
    f, line = loaded.locate(loc)
    return f"{f}:{line}: {format_loc(loc)}: {message}"


def format_loc(loc: Loc) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


_FIXES = {
    "extra_forbidden": "unknown key; remove it or check its spelling",
    "missing": "required key is missing; add it",
}


def _format_error(loaded: LoadedPolicy, err: Any) -> str:
    loc: Loc = tuple(err["loc"])
    etype = err["type"]
    if etype == "missing":
        parent = loc[:-1]
        f, line = loaded.locate(parent)
        hint = {
            "mode": 'add `mode = "plan"` or `mode = "build"`',
            "default": 'add `default = "deny"` (or "ask" / "allow")',
        }.get(str(loc[-1]), f"add `{loc[-1]} = ...`")
        return f"{f}:{line}: {format_loc(loc)}: required key is missing; {hint}"
    f, line = loaded.locate(loc)
    if etype == "extra_forbidden" and loc == ("managed",):
        return (
            f"{f}:{line}: managed: a managed policy file applies by itself (from"
            " /etc/openoxide/managed.d); a policy cannot extend or be one: remove the extends"
            " entry that names it"
        )
    if etype == "extra_forbidden":
        import difflib

        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed.split(", "), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close and allowed else ""
        msg = (
            f"unknown key {loc[-1]!r}; {hint}allowed here: {allowed}"
            if allowed
            else _FIXES[etype]
        )
    elif etype in ("enum", "literal_error"):
        msg = f"{err['msg'].lower()}, got {err.get('input')!r}"
    else:
        msg = f"{err['msg']} (got {err.get('input')!r})"
    return f"{f}:{line}: {format_loc(loc)}: {msg}"


def _allowed_keys(parent: Loc) -> str:
    from guard.policy.schema import (
        AgentPolicy,
        EgressConfig,
        KindRules,
        NetworkRules,
        PolicyFile,
        SandboxRules,
    )

    model: Any
    if len(parent) == 0:
        model = PolicyFile
    elif parent == ("egress",):
        model = EgressConfig
    elif len(parent) == 2 and parent[0] == "agents":
        model = AgentPolicy
    elif len(parent) == 3 and parent[2] == "sandbox":
        model = SandboxRules
    elif len(parent) == 3 and parent[0] == "agents" and parent[2] == "network":
        model = NetworkRules
    elif len(parent) == 3 and parent[0] == "agents":
        model = KindRules
    else:
        return ""
    return ", ".join(model.model_fields)


_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'')


def _key_rx(key: str) -> str:
    k = re.escape(key)
    return rf'(?:"{k}"|\'{k}\'|(?<!["\w-]){k}(?![\w-]))'


def locate_line(text: str, loc: Loc) -> int:
    """The 1-based line where ``loc`` (or its longest written prefix) is in ``text``.

    The text is scanned as TOML or JSON (:mod:`guard.policy.source_lines`); only when
    that scan fails does a best-effort search by regular expressions answer.
    """
    found = line_of(text, loc)
    return found if found is not None else _guess_line(text, loc)


def _guess_line(text: str, loc: Loc) -> int:
    """Best effort: the longest table header naming a prefix, then the keys after it."""
    keys: list[str] = []
    for part in loc:
        if isinstance(part, int):
            break
        keys.append(str(part))
    pos, found, rest = 0, 0, list(loc)
    for n in range(len(keys), 0, -1):
        header = r"\s*\.\s*".join(_key_rx(k) for k in keys[:n])
        m = re.search(rf"^\s*\[\s*{header}\s*\]", text, re.MULTILINE)
        if m:
            pos = found = m.end()
            rest = list(loc[n:])
            break
    for part in rest:
        if isinstance(part, int):
            bracket = text.find("[", pos)
            if bracket < 0:
                break
            for count, m in enumerate(_STRING.finditer(text, bracket)):
                if count == part:
                    found = m.start()
                    break
            break
        rx = re.compile(rf"(?:^|[\s\[{{.,]){_key_rx(str(part))}\s*(?=[.=\]:])", re.MULTILINE)
        m = rx.search(text, pos)
        if m is None:
            break
        pos = found = m.end()
    return text.count("\n", 0, found) + 1 if found else 1


def patterns_of(loaded: LoadedPolicy, agent: str, kind: str, list_name: str) -> list[Pattern]:
    """The parsed patterns of one list, each with its source (network lists: host and
    port patterns, :func:`guard.network.parse_network_pattern`)."""
    rules = getattr(loaded.model.agents[agent], kind)
    parse = parse_network_pattern if kind == "network" else parse_pattern
    out: list[Pattern] = []
    for i, text in enumerate(getattr(rules, list_name)):
        p = parse(text, loaded.source(("agents", agent, kind, list_name, i)))
        if p is not None:
            out.append(p)
    return out
