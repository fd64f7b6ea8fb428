"""The egress proxy forwards only what it decided, and refuses at once what it cannot
serve: a flood of connections, a git fetch whose body is anything but upload-pack's
pkt-lines (or whose target carries a query), and a name that resolves to an address
of the proxy machine's own interfaces.

Each attack speaks to the real proxy (tests/sandbox/egress_driver.py) and real servers on
127.0.0.1 that record what reaches them; the servers and the audit log are checked.
"""

from __future__ import annotations

import json
import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from egress_support import port_of, proxy, recorder, shared_dir, write_policy

from guard.sandbox import egress_proxy


@pytest.fixture
def work() -> Iterator[Path]:
    d = shared_dir("guard-egress-walls-")
    (d / "repo").mkdir(mode=0o777)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _policy(work: Path, allow: str, resolve: str = "") -> Path:
    return write_policy(work, f"""version = 1
extends = ["builtin:default"]
[agents.plan.network]
allow = ["{allow}"]
[egress]
resolve = {{ {resolve} }}
""")


def _records(work: Path) -> list[dict[str, object]]:
    path = work / "audit.jsonl"
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_attack_a_flood_of_connections_is_answered_503_at_once(work: Path) -> None:
    """Every slot is held by an idle connection; more connections, each kept open by its
    client without a word, are each answered 503 straight away: the proxy waits on none
    of them (it used to read from each for two seconds, one after the other, so a flood
    held every later client up). The bound below is far above what answering takes and
    below what waiting on each would."""
    pol = _policy(work, "api.test")
    held: list[socket.socket] = []
    excess: list[socket.socket] = []
    with proxy(pol, work / "repo", work / "audit.jsonl") as p:
        try:
            for _ in range(egress_proxy.MAX_CONNECTIONS):
                held.append(socket.create_connection(("127.0.0.1", p.port), timeout=60))
            while True:  # until the proxy has taken them all: the next one is refused
                probe = socket.create_connection(("127.0.0.1", p.port), timeout=60)
                probe.settimeout(1.0)
                try:
                    first = probe.recv(4096)
                except TimeoutError:
                    held.append(probe)  # accepted as a client: the proxy was not full yet
                    continue
                probe.close()
                assert first.startswith(b"HTTP/1.1 503 "), first
                break
            for _ in range(16):
                excess.append(socket.create_connection(("127.0.0.1", p.port), timeout=60))
            deadline = time.monotonic() + 20  # waiting 2 s on each would take 32 s
            answers = []
            for c in excess:
                c.settimeout(max(0.1, deadline - time.monotonic()))
                answers.append(c.recv(4096))
            assert all(a.startswith(b"HTTP/1.1 503 ") for a in answers), answers
            assert b"too many connections" in answers[0]
        finally:
            for c in held + excess:
                c.close()
