"""A validated policy as plain frozen records, and the cache that spares pydantic.

pydantic (:mod:`guard.policy.schema`) is the one validator: every policy is checked
by it once. What it accepts is kept here as :class:`Policy`, built from pydantic's
own dump of the validated model, and written (by ``guard run``, see :func:`storing`) to a
content-addressed cache in guard's data directory (a protected path: no agent may
write it). The cache key is the
SHA-256 of the exact merged input (insertion order included: the first plan agent
is the one a policy lists first) and of the validator itself (the source of
``schema.py``, of this module and of pydantic's version file), so a changed policy,
schema or pydantic is a miss. A later load of the same input builds the same
:class:`Policy` from the cached dump without importing pydantic, which costs more
than everything else ``guard run`` does before the command starts.

Anything unexpected in an entry (unreadable, not JSON, another key, a field too
many or too few) is a miss: pydantic validates again. Nothing here can accept a
policy pydantic did not. What tomllib parsed from a policy text is kept the same way
(:func:`parsed_toml`), keyed by the text itself, so the next load of the same text
needs no TOML parser either.
"""

# Lazy imports: tempfile only to store a new cache entry (guard run start-up time).

from __future__ import annotations

import contextlib
import contextvars
import importlib.util
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from guard.effects import Action
from guard.paths import data_dir
from guard.record import Record
from guard.record import set_field as _set
from guard.sha import sha256

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

#: bump when the cached form changes meaning
CACHE_FORMAT = b"guard-policy-cache 1"


class Rules(Record):
    """One effect kind's lists (:class:`guard.policy.schema.KindRules`)."""

    __slots__ = ("allow", "ask", "default", "deny")
    __match_args__: tuple[str, ...] = ("deny", "ask", "allow", "default")

    deny: list[str]
    ask: list[str]
    allow: list[str]
    default: Action | None

    def __init__(
        self, deny: list[str], ask: list[str], allow: list[str], default: Action | None
    ) -> None:
        _set(self, "deny", deny)
        _set(self, "ask", ask)
        _set(self, "allow", allow)
        _set(self, "default", default)


class NetworkRules(Rules):
    """:class:`guard.policy.schema.NetworkRules`: the lists, and ``model_api``."""

    __slots__ = ("model_api",)
    __match_args__ = ("deny", "ask", "allow", "default", "model_api")

    model_api: list[str]

    def __init__(
        self,
        deny: list[str],
        ask: list[str],
        allow: list[str],
        default: Action | None,
        model_api: list[str],
    ) -> None:
        super().__init__(deny, ask, allow, default)
        _set(self, "model_api", model_api)


class Egress(Record):
    """:class:`guard.policy.schema.EgressConfig`."""

    __slots__ = ("resolve",)
    __match_args__ = ("resolve",)

    resolve: dict[str, str]

    def __init__(self, resolve: dict[str, str]) -> None:
        _set(self, "resolve", resolve)


class Sandbox(Record):
    """:class:`guard.policy.schema.SandboxRules`."""

    __slots__ = ("confine", "require", "sockets", "writable")
    __match_args__ = ("writable", "confine", "require", "sockets")

    writable: list[str]
    confine: bool
    require: list[str]
    sockets: list[str]

    def __init__(
        self, writable: list[str], confine: bool, require: list[str], sockets: list[str]
    ) -> None:
        _set(self, "writable", writable)
        _set(self, "confine", confine)
        _set(self, "require", require)
        _set(self, "sockets", sockets)


class Agent(Record):
    """One agent (:class:`guard.policy.schema.AgentPolicy`)."""

    __slots__ = ("default", "delete", "description", "exec", "mode", "network", "protected",
                 "read", "sandbox", "subagents", "tools", "write")  # fmt: skip
    __match_args__ = ("mode", "default", "description", "tools", "subagents", "protected",
                      "read", "write", "delete", "exec", "network", "sandbox")  # fmt: skip

    mode: str
    default: Action
    description: str | None
    tools: dict[str, Action]
    subagents: list[str] | None
    protected: bool
    read: Rules
    write: Rules
    delete: Rules
    exec: Rules
    network: NetworkRules
    sandbox: Sandbox

    def __init__(
        self,
        mode: str,
        default: Action,
        description: str | None,
        tools: dict[str, Action],
        subagents: list[str] | None,
        protected: bool,
        read: Rules,
        write: Rules,
        delete: Rules,
        exec: Rules,
        network: NetworkRules,
        sandbox: Sandbox,
    ) -> None:
        _set(self, "mode", mode)
        _set(self, "default", default)
        _set(self, "description", description)
        _set(self, "tools", tools)
        _set(self, "subagents", subagents)
        _set(self, "protected", protected)
        _set(self, "read", read)
        _set(self, "write", write)
        _set(self, "delete", delete)
        _set(self, "exec", exec)
        _set(self, "network", network)
        _set(self, "sandbox", sandbox)


class Audit(Record):
    """:class:`guard.policy.schema.AuditSettings`."""

    __slots__ = ("facility", "spool_max_bytes", "syslog")
    __match_args__ = ("syslog", "facility", "spool_max_bytes")

    syslog: str | None
    facility: str
    spool_max_bytes: int

    def __init__(
        self, syslog: str | None = None, facility: str = "auth", spool_max_bytes: int = 64 << 20
    ) -> None:
        _set(self, "syslog", syslog)
        _set(self, "facility", facility)
        _set(self, "spool_max_bytes", spool_max_bytes)


class Policy(Record):
    """A whole validated policy (:class:`guard.policy.schema.PolicyFile`)."""

    __slots__ = ("agents", "audit", "description", "egress", "extends", "lint", "version")
    __match_args__ = ("version", "extends", "description", "agents", "egress", "lint", "audit")

    version: int
    extends: list[str]
    description: str | None
    agents: dict[str, Agent]
    egress: Egress
    lint: dict[str, object]
    audit: Audit

    def __init__(
        self,
        version: int,
        extends: list[str],
        description: str | None,
        agents: dict[str, Agent],
        egress: Egress,
        lint: dict[str, object],
        audit: Audit,
    ) -> None:
        _set(self, "version", version)
        _set(self, "extends", extends)
        _set(self, "description", description)
        _set(self, "agents", agents)
        _set(self, "egress", egress)
        _set(self, "lint", lint)
        _set(self, "audit", audit)

    @classmethod
    def empty(cls) -> Policy:
        return cls(1, [], None, {}, Egress({}), {}, Audit())


KINDS = ("read", "write", "delete", "exec", "network")


def _keys(d: Any, cls: type[Record]) -> dict[str, Any]:
    """``d`` when it is a dict with exactly ``cls``'s fields, else ValueError."""
    if not isinstance(d, dict) or set(d) != set(cls.__match_args__):
        raise ValueError(f"not a {cls.__name__}: {sorted(d) if isinstance(d, dict) else d!r}")
    return d


def _strs(v: Any) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
        raise ValueError(f"not a list of strings: {v!r}")
    return list(v)


def _opt_str(v: Any) -> str | None:
    if v is not None and not isinstance(v, str):
        raise ValueError(f"not a string: {v!r}")
    return v


def _bool(v: Any) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"not a boolean: {v!r}")
    return v


def _rules(d: Any) -> Rules:
    d = _keys(d, Rules)
    default = None if d["default"] is None else Action(d["default"])
    return Rules(_strs(d["deny"]), _strs(d["ask"]), _strs(d["allow"]), default)


def _walls(v: Any) -> list[str]:
    walls = _strs(v)
    if any(w not in ("network", "ipc", "processes", "metadata") for w in walls):
        raise ValueError(f"not a list of walls: {v!r}")
    return walls


def _network(d: Any) -> NetworkRules:
    d = _keys(d, NetworkRules)
    r = _rules({k: v for k, v in d.items() if k != "model_api"})
    return NetworkRules(r.deny, r.ask, r.allow, r.default, _strs(d["model_api"]))


def _egress(d: Any) -> Egress:
    d = _keys(d, Egress)
    resolve = d["resolve"]
    if not isinstance(resolve, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in resolve.items()
    ):
        raise ValueError(f"egress.resolve {resolve!r}")
    return Egress(dict(resolve))


def _agent(d: Any) -> Agent:
    d = _keys(d, Agent)
    if d["mode"] not in ("plan", "build"):
        raise ValueError(f"mode {d['mode']!r}")
    tools = d["tools"]
    if not isinstance(tools, dict) or not all(isinstance(k, str) for k in tools):
        raise ValueError(f"tools {tools!r}")
    s = _keys(d["sandbox"], Sandbox)
    return Agent(
        mode=d["mode"],
        default=Action(d["default"]),
        description=_opt_str(d["description"]),
        tools={k: Action(v) for k, v in tools.items()},
        subagents=None if d["subagents"] is None else _strs(d["subagents"]),
        protected=_bool(d["protected"]),
        read=_rules(d["read"]),
        write=_rules(d["write"]),
        delete=_rules(d["delete"]),
        exec=_rules(d["exec"]),
        network=_network(d["network"]),
        sandbox=Sandbox(
            _strs(s["writable"]), _bool(s["confine"]), _walls(s["require"]), _strs(s["sockets"])
        ),
    )


FACILITIES = (
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron",
    "authpriv", "ftp", *(f"local{n}" for n in range(8)),
)  # fmt: skip


def audit_of(d: Any) -> Audit:
    """The :class:`Audit` of pydantic's dump of an ``[audit]`` table; ValueError otherwise."""
    d = _keys(d, Audit)
    size = d["spool_max_bytes"]
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(f"spool_max_bytes {size!r}")
    if d["facility"] not in FACILITIES:
        raise ValueError(f"facility {d['facility']!r}")
    return Audit(_opt_str(d["syslog"]), d["facility"], size)


def from_dump(d: Any) -> Policy:
    """The :class:`Policy` of pydantic's ``model_dump(mode="json")`` of a validated
    :class:`~guard.policy.schema.PolicyFile`; ValueError for anything else."""
    d = _keys(d, Policy)
    if d["version"] != 1 or isinstance(d["version"], bool):
        raise ValueError(f"version {d['version']!r}")
    agents = d["agents"]
    lint = d["lint"]
    if not isinstance(agents, dict) or not isinstance(lint, dict):
        raise ValueError("agents and lint must be tables")
    return Policy(
        version=1,
        extends=_strs(d["extends"]),
        description=_opt_str(d["description"]),
        agents={str(name): _agent(a) for name, a in agents.items()},
        egress=_egress(d["egress"]),
        lint=dict(lint),
        audit=audit_of(d["audit"]),
    )


# -- the cache -------------------------------------------------------------------------

_fingerprint: bytes | None = None


def validator_files() -> list[Path]:
    """The files the validated form depends on besides the input: the schema, this
    module, pydantic's version (found without importing pydantic)."""
    here = Path(__file__).resolve()
    files = [here.parent / "schema.py", here]
    spec = importlib.util.find_spec("pydantic")
    if spec is not None and spec.origin is not None:
        files.append(Path(spec.origin).parent / "version.py")
    return files


def fingerprint_of(files: list[Path]) -> bytes:
    h = sha256(CACHE_FORMAT)
    for f in files:
        try:
            h.update(b"\0" + f.read_bytes())
        except OSError:
            h.update(b"\0<unreadable " + os.fsencode(str(f)) + b">")
    return h.digest()


def validator_fingerprint() -> bytes:
    """:func:`fingerprint_of` the :func:`validator_files`, once per process."""
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = fingerprint_of(validator_files())
    return _fingerprint


def cache_key(merged: dict[str, Any]) -> str | None:
    """The key of a merged policy input, or None when it is not plain JSON data (a TOML
    date, say): then there is no cache, pydantic validates every time."""
    try:
        text = json.dumps(merged, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    h = sha256(validator_fingerprint())
    h.update(b"\0" + text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def cache_dir() -> Path:
    return data_dir() / "cache" / "policy"


def cached(key: str) -> Policy | None:
    """The validated form stored under ``key``, or None (missing or not exactly right)."""
    try:
        with open(cache_dir() / f"{key}.json", "rb") as f:
            doc = json.loads(f.read())
        if not isinstance(doc, dict) or doc.get("key") != key or set(doc) != {"key", "policy"}:
            return None
        return from_dump(doc["policy"])
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None


_STORING: contextvars.ContextVar[bool] = contextvars.ContextVar("guard_policy_store", default=False)


@contextlib.contextmanager
def storing() -> Iterator[None]:
    """Loads inside this block keep what pydantic accepted (``guard run`` does; every
    load reads the cache, but only a caller that opts in writes guard's data directory:
    read-only commands such as ``guard replay`` write nothing there)."""
    token = _STORING.set(True)
    try:
        yield
    finally:
        _STORING.reset(token)


def store(key: str, dump: dict[str, Any]) -> None:
    """Keep pydantic's dump of a validated policy under ``key`` (best effort: a cache),
    inside :func:`storing` only."""
    _write(cache_dir(), f"{key}.json", {"key": key, "policy": dump})


def _write(d: Path, name: str, doc: dict[str, Any]) -> None:
    """``doc`` as the cache entry ``d/name``, written whole or not at all, inside
    :func:`storing` only (best effort: a cache)."""
    if not _STORING.get():
        return
    with contextlib.suppress(OSError, TypeError, ValueError):
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        data = json.dumps(doc, ensure_ascii=False, allow_nan=False).encode("utf-8")
        import tempfile

        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, d / name)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


# -- parsed TOML -----------------------------------------------------------------------
# What tomllib read from a policy text, kept beside the validated forms (:func:`toml_dir`,
# in guard's data directory too), by ``guard run`` only: a later load of the same text
# (the same characters, the same interpreter's tomllib) reads it back as JSON without
# importing tomllib. Only documents JSON carries exactly are kept (no dates, no inf or
# nan); anything unexpected in an entry is a miss, and tomllib parses again.


def toml_dir() -> Path:
    return data_dir() / "cache" / "toml"


def _toml_key(text: str) -> str:
    h = sha256(b"guard-toml-cache 1\0" + sys.version.encode() + b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def parsed_toml(text: str) -> dict[str, Any] | None:
    """What tomllib parsed from exactly ``text`` before, or None (not kept, not exactly right)."""
    key = _toml_key(text)
    try:
        with open(toml_dir() / f"{key}.json", "rb") as f:
            doc = json.loads(f.read())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or set(doc) != {"toml", "data"} or doc["toml"] != key:
        return None
    data = doc["data"]
    return data if isinstance(data, dict) else None


def store_toml(text: str, data: dict[str, Any]) -> None:
    """Keep what tomllib parsed from ``text`` when JSON carries it exactly, inside
    :func:`storing` only."""
    if not _STORING.get():
        return
    try:
        exact = json.loads(json.dumps(data, allow_nan=False)) == data
    except (TypeError, ValueError, RecursionError):  # a date, inf or nan: not kept
        return
    if exact:
        key = _toml_key(text)
        _write(toml_dir(), f"{key}.json", {"toml": key, "data": data})
