"""Guard's egress proxy: the only way out of a confined command's network namespace.

A confined command runs in a network namespace with loopback only. Inside it, a
listener on ``127.0.0.1:PROXY_PORT`` is handed to a process outside the
namespace, which serves it with :class:`EgressProxy`; :func:`proxy_env` is what
the command's environment gets so that its programs use it. The proxy speaks

* **HTTP CONNECT** (HTTPS and any other TLS): one decision per tunnel, by host
  and port only (what is sent inside is encrypted). A tunnel whose first bytes
  are a TLS ClientHello naming another server than the CONNECT's host is closed
  (domain fronting); in plan mode a tunnel that does not start with TLS is
  closed too, since nothing in it could be checked;
* **plain HTTP** (absolute-form requests): every request on a connection is
  parsed strictly and forwarded as guard renders it
  (:mod:`guard.sandbox.httpwire`); in plan mode only GET, HEAD and OPTIONS (and
  a git fetch's ``POST …/git-upload-pack``) are sent.

No SOCKS: HTTP clients, git over HTTP(S), package managers and the host agents
all speak to an HTTP proxy; ``ssh`` and ``git://`` use neither kind of proxy
without configuration, and what they send cannot be judged read-only anyway.

Every connection is a ``network`` effect decided by the gate with the agent's
network rules (:mod:`guard.analysis.egress` turns it into effects) and recorded in
the audit log like any decision, with the ``source`` of the :class:`EgressSpec`.
The proxy resolves a name itself, only once the name is allowed (a refused name
is never looked up), and connects to the address it checked: a private,
loopback or link-local answer is reached only where a rule allows that address
itself (DNS rebinding). ``[egress] resolve`` in the policy maps a name to an
address (tests, local mirrors); the confined command cannot change it.

The confinement helper runs without site-packages (``python3 -E -s -S``) and
imports this module by its plain name: it needs ``os`` and ``sys`` alone at
import, and :meth:`EgressProxy.serve` only ``threading``. The connection
machinery (:mod:`guard.sandbox.relay`) is loaded on the first connection, the
policy and the gate with it: a command that never uses the network never pays
for them.
"""

# Lazy imports: threads, json, the relay only when used: `guard run` start-up speed.

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    import threading
    from typing import Any

    from guard.sandbox import relay

#: The port of the proxy's listener inside a confined command's network namespace.
PROXY_PORT = 30128
#: The front doors an egress decision is recorded under.
SOURCES = ("hook", "run", "mcp")
#: How many client connections are served at once; more are answered 503.
MAX_CONNECTIONS = 256
_GUARD_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPEC_KEYS = ("agent", "cwd", "policy", "source", "audit")


def proxy_env(port: int = PROXY_PORT) -> dict[str, str]:
    """The environment a confined command gets so that its programs use the proxy: the
    usual proxy variables in both cases, npm's, yarn's, pip's and cargo's, and Node's
    switch to honour them; loopback (the namespace's own) stays direct."""
    url = f"http://127.0.0.1:{port}"
    direct = "localhost,127.0.0.1,::1"
    env = {
        name: url
        for name in (
            "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
            "npm_config_proxy", "npm_config_https_proxy", "YARN_HTTP_PROXY",
            "YARN_HTTPS_PROXY", "PIP_PROXY", "CARGO_HTTP_PROXY",
        )
    }  # fmt: skip
    env.update({"NO_PROXY": direct, "no_proxy": direct, "npm_config_noproxy": direct})
    env["NODE_USE_ENV_PROXY"] = "1"
    return env


class EgressSpec:
    """What decides a confined command's connections (immutable; passed to the helper as
    ``--egress JSON``).

    ``agent`` is the policy's agent; ``cwd`` the command's directory (absolute: the
    policy and the roots are found from it); ``policy`` an explicit policy file
    (None: ``$GUARD_POLICY`` of the proxy's process, else the worktree's, else the
    default); ``source`` the front door named in audit records: ``hook`` (a
    confined shell command), ``run`` (``guard run``: the agent's ``model_api``
    list applies too), ``mcp`` (a confined MCP server); ``audit`` the audit log
    (None: the project's). ValueError for anything else.
    """

    __slots__ = _SPEC_KEYS
    agent: str
    cwd: str
    policy: str | None
    source: str
    audit: str | None

    def __init__(
        self, agent: str, cwd: str, policy: str | None, source: str, audit: str | None = None
    ) -> None:
        values = (agent, cwd, policy, source, audit)
        for name, value in zip(_SPEC_KEYS, values, strict=True):
            object.__setattr__(self, name, value)
        problem = self._problem()
        if problem:
            raise ValueError(f"invalid egress spec: {problem}")

    def _problem(self) -> str:
        for name in ("agent", "cwd"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                return f"{name} must be a non-empty string, got {value!r}"
        for name in ("policy", "audit"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                return f"{name} must be a non-empty string or null, got {value!r}"
        if self.source not in SOURCES:
            return f"source must be one of {', '.join(SOURCES)}, got {self.source!r}"
        if not os.path.isabs(self.cwd):
            return f"cwd must be an absolute path, got {self.cwd!r}"
        return ""

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EgressSpec is immutable")

    def _values(self) -> tuple[str | None, ...]:
        return tuple(getattr(self, k) for k in _SPEC_KEYS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EgressSpec) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={getattr(self, k)!r}" for k in _SPEC_KEYS)
        return f"EgressSpec({inner})"

    def to_json(self) -> dict[str, str | None]:
        return {k: getattr(self, k) for k in _SPEC_KEYS}

    def replace(self, **changes: str | None) -> EgressSpec:
        """A copy with ``changes`` (a plain class, not a dataclass: ``dataclasses`` would
        cost the helper's start-up more than this whole module)."""
        unknown = sorted(set(changes) - set(_SPEC_KEYS))
        if unknown:
            raise TypeError(f"EgressSpec has no field {', '.join(unknown)}")
        return EgressSpec(**{**self.to_json(), **changes})  # type: ignore[arg-type]

    def to_argv(self) -> list[str]:
        """``["--egress", JSON]``: the helper's flag (:meth:`from_argv_value` reads it)."""
        import json

        return ["--egress", json.dumps(self.to_json(), sort_keys=True)]

    @classmethod
    def from_argv_value(cls, value: str) -> EgressSpec:
        """The spec of ``--egress VALUE``; ValueError naming what is wrong."""
        import json

        try:
            data = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"--egress: not JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError("--egress: expected a JSON object")
        extra = sorted(set(data) - set(_SPEC_KEYS))
        missing = sorted({"agent", "cwd", "policy", "source"} - set(data))
        if extra or missing:
            raise ValueError(f"--egress: unknown keys {extra}, missing keys {missing}")
        return cls(data["agent"], data["cwd"], data["policy"], data["source"], data.get("audit"))


class EgressProxy:
    """Serves connections accepted on a listener: decides, relays, records.

    :meth:`serve` returns at once; daemon threads accept and relay until
    :meth:`close`. Thread-safe.
    """

    def __init__(self, spec: EgressSpec) -> None:
        import threading

        self.spec = spec
        self.lock = threading.Lock()
        self._load_lock = threading.Lock()
        self._decider: relay.Decider | None = None
        #: why the policy could not be loaded (every connection is refused meanwhile)
        self.decider_error = ""
        self._sockets: set[socket.socket] = set()
        self._clients = 0
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.closed = False

    def serve(self, listener: socket.socket) -> None:
        """Accept on ``listener`` (a listening TCP socket) in a daemon thread."""
        import threading

        with self.lock:
            if self.closed or self._listener is not None:
                raise RuntimeError("this egress proxy is closed or already serving")
            listener.setblocking(True)
            self._listener = listener
            self._thread = threading.Thread(
                target=self._accept_loop, args=(listener,), name="guard-egress", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop accepting and end every connection (the listener is shut down)."""
        import threading

        with self.lock:
            self.closed = True
            listener, sockets = self._listener, list(self._sockets)
        for s in [listener, *sockets] if listener is not None else sockets:
            _shutdown(s)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)

    def _accept_loop(self, listener: socket.socket) -> None:
        import errno
        import threading

        while True:
            try:
                conn, _ = listener.accept()
            except OSError as exc:
                if self.closed or exc.errno in (errno.EBADF, errno.EINVAL, errno.ENOTSOCK):
                    return
                threading.Event().wait(0.05)  # EMFILE and the like: let connections end
                continue
            with self.lock:
                full = self.closed or self._clients >= MAX_CONNECTIONS
                if not full:
                    self._clients += 1
                    self._sockets.add(conn)
            if full:
                # at once: the accept loop waits on no client (a flood is refused as fast
                # as it comes, and the clients being served are not held up)
                _relay().answer(
                    conn, 503, "guard's egress proxy has too many connections open", wait=0
                )
                conn.close()
                if self.closed:
                    return
                continue
            threading.Thread(
                target=self._client, args=(conn,), name="guard-egress-client", daemon=True
            ).start()

    def _client(self, conn: socket.socket) -> None:
        try:
            client: type[relay.Client] = _relay().Client  # typed: checks self fits it
            client(self, conn).run()
        except Exception:
            pass  # a connection never takes the proxy down; the client sees it close
        finally:
            with self.lock:
                self._clients -= 1
                self._sockets.discard(conn)
            conn.close()

    def decider(self) -> relay.Decider | None:
        """The policy side, loaded once; None (and :attr:`decider_error`) when it cannot
        be: every connection is then refused, and loading is tried again next time."""
        with self._load_lock:
            if self._decider is None:
                try:
                    _import_guard()
                    new_decider: type[relay.Decider] = _relay().Decider
                    self._decider = new_decider(self.spec)
                    self.decider_error = ""
                except Exception as exc:
                    self.decider_error = f"{type(exc).__name__}: {exc}"
            return self._decider

    def track(self, s: socket.socket) -> bool:
        """Keep ``s`` to shut it down on :meth:`close` (False: closing already)."""
        with self.lock:
            if self.closed:
                return False
            self._sockets.add(s)
            return True

    def untrack(self, s: socket.socket) -> None:
        with self.lock:
            self._sockets.discard(s)


def _shutdown(s: socket.socket) -> None:
    import socket as _socket

    try:  # noqa: SIM105 (contextlib would cost the helper start-up time)
        s.shutdown(_socket.SHUT_RDWR)
    except OSError:
        pass


def _relay() -> Any:
    """:mod:`guard.sandbox.relay`, imported on the first connection."""
    if TYPE_CHECKING or __package__:
        from guard.sandbox import relay
    else:  # the helper: the sibling by its plain name
        import relay
    return relay


def _import_guard() -> None:
    """Make ``guard`` importable in the helper (started without site-packages): this
    interpreter's site directories, and this very installation ahead of them."""
    try:
        import guard.gate
    except ImportError:
        import site

        site.main()
        if _GUARD_ROOT not in sys.path:
            sys.path.insert(0, _GUARD_ROOT)
        import guard.gate
    import guard

    where = os.path.dirname(os.path.dirname(os.path.abspath(guard.__file__)))
    if os.path.realpath(where) != os.path.realpath(_GUARD_ROOT):
        raise ImportError(f"guard is imported from {where}, not from {_GUARD_ROOT}")
