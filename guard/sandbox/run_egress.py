"""``guard run``'s egress proxy: :mod:`guard.sandbox.egress_proxy` as
:func:`guard.sandbox.supervise.run` uses it (its :class:`~guard.sandbox.supervise.Egress`).

The listener the helper hands over is only polled until the first connection comes: a
command that never connects costs no socket module and no accept loop.
"""

# Lazy imports: the egress proxy, socket, select and threading only when used (guard run's
# start-up).

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    import threading


class Proxy:
    """guard's egress proxy as :func:`guard.sandbox.supervise.run` uses it."""

    def __init__(self, agent: str, cwd: str, policy: str | None, source: str = "run") -> None:
        from guard.sandbox import egress_proxy as egress

        self.port = egress.PROXY_PORT
        self.env = egress.proxy_env(self.port)
        self._proxy = egress.EgressProxy(
            egress.EgressSpec(agent, os.path.abspath(cwd), policy, source)
        )

        self._listener: int | None = None
        self._wake: tuple[int, int] | None = None
        self._waiter: threading.Thread | None = None
        self._closing = False
        self._served = False

    def start(self, listener: int) -> None:
        """Serve ``listener`` from its first connection on: until one comes, a thread only
        polls it (a command that never connects costs no socket module, no accept loop)."""
        import threading

        self._listener, self._wake = listener, os.pipe()
        self._lock = threading.Lock()
        self._waiter = threading.Thread(target=self._first_connection, daemon=True,
                                        name="guard-egress-wait")  # fmt: skip
        self._waiter.start()

    def _first_connection(self) -> None:
        import select

        assert self._listener is not None and self._wake is not None
        poll = select.poll()
        poll.register(self._listener, select.POLLIN)
        poll.register(self._wake[0], select.POLLIN)
        while True:
            try:
                ready = poll.poll()
            except InterruptedError:
                continue
            break
        with self._lock:
            if self._closing or any(fd == self._wake[0] for fd, _ in ready):
                return  # closed first: close() owns the listener
            import socket

            self._proxy.serve(socket.socket(fileno=self._listener))
            self._served = True

    def close(self) -> None:
        if self._waiter is not None and self._wake is not None:
            with self._lock:
                self._closing = True
            os.write(self._wake[1], b"x")
            self._waiter.join(5)  # it returns at once: it only polls, or started serving
            with self._lock:
                served = self._served
            if not served and self._listener is not None:
                os.close(self._listener)
            for fd in self._wake:
                os.close(fd)
            self._waiter = self._wake = self._listener = None
        self._proxy.close()
