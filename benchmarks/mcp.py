"""Per-call overhead of `guard mcp` against calling the MCP server directly.

Same client (the official Python SDK), same server (the real
@modelcontextprotocol/server-filesystem), same 500 calls (reads and listings of
a temporary git repository, all allowed in plan mode so both sides do the same
server work), in one run. Startup is not timed. Each call goes to both sides
back to back (alternating which goes first), so the added latency of a call is
the proxied call's time minus its direct twin's: its median and p99 are
printed, with the CPU time the `guard mcp` process spent per call (Linux), then the
ratio (proxied / direct wall time of all calls), last.

    .venv/bin/python benchmarks/mcp.py [--calls 500] [--audit all|refusals] [--floor]
        [--stages] [--quick]

``--floor`` adds two sides to the same interleaved run: the same calls through a bare
asyncio relay (this script's ``--relay`` mode: each line read with ``json.loads`` and
written with ``json.dumps``, no policy, no audit), the least any Python stdio proxy that
reads the messages adds on this machine at this load, and through a relay that passes
the bytes on as they come (``--relay-bytes``: ``os.read``/``os.write`` on a selector,
nothing parsed), the cost of the extra process hop alone, and through a relay that parses
and renders each line as ``--relay`` does but on a selector with ``os.read``/``os.write``
(``--relay-json``: what an event loop of asyncio's adds, told apart from the JSON); their
ratios to direct and guard's ratio to the first are printed before the last line.

``--stages`` then runs the same calls once more through ``guard mcp`` alone (not timed,
not in the ratio), with the CPU time of each stage of a call counted in the proxy
(``benchmarks/mcp_stages.py``: reading, deciding, forwarding, making and writing the
verdict record, the answer's way back), and prints it per call before the last line.

``--quick`` runs 200 calls (well under a minute on a busy machine). ``--wire`` times
only what the proxy does to the two lines of one call (the request and its answer):
guard's strict reading and canonical rendering (guard/mcp/wire.py) against a plain
``json.loads`` of each line with the bytes forwarded as they came (what the proxy did
before), interleaved in one run; the ratio is printed last.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

# this script is named mcp.py: keep its directory from shadowing the `mcp` SDK package
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent / "tests" / "mcp"))

from fsserver import VERSION, server_binary  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


def make_repo(root: Path) -> Path:
    repo = root / "project"
    (repo / "src").mkdir(parents=True)
    for i in range(20):
        (repo / "src" / f"m{i}.py").write_text(f"VALUE = {i}\n" * 20)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo.resolve()


async def call(session: ClientSession, repo: Path, i: int) -> float:
    """One call (read or listing); its latency in seconds."""
    began = time.perf_counter()
    if i % 2:
        r = await session.call_tool("list_directory", {"path": str(repo / "src")})
    else:
        r = await session.call_tool("read_text_file", {"path": str(repo / "src" / f"m{i % 20}.py")})
    took = time.perf_counter() - began
    if getattr(r, "is_error", True):
        raise SystemExit(f"call {i} failed: {r}")
    return took


async def compare(
    sides: list[StdioServerParameters],
    repo: Path,
    calls: int,
    warmed: Callable[[int | None], None] | None = None,
) -> tuple[list[list[float]], float | None]:
    """All connections open at once (the first direct, the second through `guard mcp`);
    each call goes to every side, in rotating order, so the sides see the same machine
    load (a warm-up of 20 calls each is not counted; ``warmed`` is then given the `guard
    mcp` process's pid). The latencies of each side, and the CPU time of the `guard mcp`
    process over the timed calls (None off Linux)."""
    with open(repo.parent / "server.stderr", "a") as errlog:
        async with contextlib.AsyncExitStack() as stack:
            sessions = []
            for params in sides:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                sessions.append(session)
            for i in range(20):
                for session in sessions:
                    await call(session, repo, i)
            lat: list[list[float]] = [[] for _ in sessions]
            pid = proxy_pid()
            if warmed is not None:
                warmed(pid)
            cpu_before = cpu_seconds(pid)
            n = len(sessions)
            for i in range(calls):
                for k in range(n):
                    side = (i + k) % n if i % 2 else (i - k) % n
                    lat[side].append(await call(sessions[side], repo, i))
            cpu_after = cpu_seconds(pid)
            cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            return lat, cpu


async def relay(argv: list[str]) -> None:
    """The floor: a bare stdio relay to the server ``argv`` (each line parsed and rendered
    again with the stdlib's json, nothing checked, nothing recorded)."""
    import json

    loop = asyncio.get_running_loop()
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    server_in, server_out = proc.stdin, proc.stdout
    out = os.fdopen(os.dup(1), "wb", buffering=0)

    def render(line: bytes) -> bytes:
        return json.dumps(json.loads(line), separators=(",", ":")).encode() + b"\n"

    def lines(buf: bytearray, data: bytes) -> list[bytes]:
        buf += data
        *whole, rest = bytes(buf).split(b"\n")
        buf[:] = rest
        return [line for line in whole if line.strip()]

    class Client(asyncio.Protocol):
        buf = bytearray()

        def data_received(self, data: bytes) -> None:
            for line in lines(self.buf, data):
                server_in.write(render(line))

        def connection_lost(self, exc: Exception | None) -> None:
            server_in.close()

    await loop.connect_read_pipe(Client, sys.stdin)
    buf = bytearray()
    while data := await server_out.read(65536):
        for line in lines(buf, data):
            out.write(render(line))
    await proc.wait()


def _selector_relay(argv: list[str], change: Callable[[int, bytes], bytes] | None) -> None:
    """Relay stdin to the server ``argv`` and its stdout back, on a selector with
    ``os.read``/``os.write``; ``change(fd, data)`` gives what to pass on for what was read
    from ``fd`` (None: the bytes as they come)."""
    import selectors

    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    route = {0: proc.stdin.fileno(), proc.stdout.fileno(): 1}
    with selectors.DefaultSelector() as sel:
        for fd in route:
            sel.register(fd, selectors.EVENT_READ)
        while sel.get_map():
            for key, _ in sel.select():
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fd)
                    if key.fd == 0:
                        proc.stdin.close()
                    continue
                view = memoryview(data if change is None else change(key.fd, data))
                while view:
                    view = view[os.write(route[key.fd], view):]
    proc.wait()


def relay_bytes(argv: list[str]) -> None:
    """The floor of any proxy: the bytes passed on as they come, both ways, nothing parsed."""
    _selector_relay(argv, None)


def relay_json(argv: list[str]) -> None:
    """A bare relay on a selector, not asyncio: each line parsed and rendered again with
    the stdlib's json (as ``--relay`` does), read and written with ``os.read``/``os.write``."""
    import json

    rest: dict[int, bytes] = {}

    def render(fd: int, data: bytes) -> bytes:
        *whole, rest[fd] = (rest.get(fd, b"") + data).split(b"\n")
        return b"".join(json.dumps(json.loads(line), separators=(",", ":")).encode() + b"\n"
                        for line in whole if line.strip())

    _selector_relay(argv, render)


def stages(server: Path, repo: Path, calls: int, audit: str) -> list[str]:
    """The CPU time per call of each stage in `guard mcp` (a run of its own, not timed)."""
    import json

    out = repo.parent / "stages.json"
    wrapped = StdioServerParameters(
        command=sys.executable,
        args=[str(_HERE / "mcp_stages.py"), str(out), "mcp", "--audit", audit, "--",
              str(server), str(repo)],
        cwd=str(repo),
    )
    def warmed(pid: int | None) -> None:  # count from here on
        if pid is None:
            raise SystemExit("--stages: the guard mcp process was not found (Linux /proc)")
        os.kill(pid, signal.SIGUSR1)

    _, cpu = asyncio.run(compare([wrapped], repo, calls, warmed))
    spent = json.loads(out.read_text())
    lines = [f"CPU time per call in guard mcp by stage ({calls} calls after the warm-up, thread"
             " time; a stage indented is part of the one above it):"]
    for label, depth, ns, _count in spent:
        lines.append(f"  {'  ' * depth}{label:{36 - 2 * depth}} {ns / calls / 1000:7.1f} µs")
    if cpu is not None:
        lines.append(f"  {'process total (all threads, ticks)':36} {cpu / calls * 1e6:7.0f} µs")
    return lines


def proxy_pid() -> int | None:
    """The `guard mcp` child of this process (Linux /proc), or None."""
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and b"mcp" in argv:
                    return int(entry)
    return None


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of ``pid`` (all its threads) so far, or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def summary(name: str, lat: list[float]) -> str:
    return (
        f"{name:8} total {sum(lat) * 1000:8.1f} ms   mean {statistics.mean(lat) * 1e6:7.0f} µs"
        f"   median {statistics.median(lat) * 1e6:7.0f} µs"
        f"   p95 {percentile(lat, 0.95) * 1e6:7.0f} µs   p99 {percentile(lat, 0.99) * 1e6:7.0f} µs"
    )


def wire_cost(rounds: int = 20000) -> None:
    """Strict reading + rendering of one call's two lines against plain json.loads."""
    import json

    from guard.mcp import wire

    text = "VALUE = 3\n" * 20
    request = json.dumps({"jsonrpc": "2.0", "id": 17, "method": "tools/call", "params": {
        "name": "read_text_file", "arguments": {"path": "/tmp/project/src/m3.py"}}}).encode()
    answer = json.dumps({"jsonrpc": "2.0", "id": 17, "result": {
        "content": [{"type": "text", "text": text}], "structuredContent": {"content": text}}}
    ).encode()

    def plain() -> None:
        json.loads(request)
        json.loads(answer)

    def strict() -> None:
        wire.render(wire.read(request))
        wire.render(wire.read(answer))

    # CPU time of this process (steady on a busy machine), in batches of 100, interleaved
    took = {plain: 0.0, strict: 0.0}
    for i in range(rounds // 100):
        for fn in (plain, strict) if i % 2 else (strict, plain):
            began = time.process_time()
            for _ in range(100):
                fn()
            took[fn] += time.process_time() - began
    base, new = took[plain] / rounds * 1e6, took[strict] / rounds * 1e6
    print(f"one call's request + answer, {rounds} rounds interleaved (CPU time), load"
          f" average {os.getloadavg()[0]:.2f}")
    print(f"plain json.loads, bytes forwarded: {base:.1f} µs per call")
    print(f"strict read + canonical rendering: {new:.1f} µs per call (+{new - base:.1f} µs)")
    print(f"ratio strict/plain: {new / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=None, help="calls (default 500)")
    parser.add_argument("--audit", choices=["all", "refusals"], default="all")
    parser.add_argument("--quick", action="store_true", help="200 calls")
    parser.add_argument("--wire", action="store_true", help="time the line handling only")
    parser.add_argument(
        "--floor", action="store_true", help="also time a bare Python relay (the floor)"
    )
    parser.add_argument(
        "--stages", action="store_true", help="then time each stage of a call in the proxy"
    )
    parser.add_argument("--relay", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--relay-bytes", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.add_argument("--relay-json", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay:
        asyncio.run(relay(args.relay))
        return
    if args.relay_bytes:
        relay_bytes(args.relay_bytes)
        return
    if args.relay_json:
        relay_json(args.relay_json)
        return
    if args.wire:
        wire_cost()
        return
    calls = args.calls or (200 if args.quick else 500)
    server = server_binary()
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(Path(tmp))
        direct = StdioServerParameters(command=str(server), args=[str(repo)], cwd=str(repo))
        proxied = StdioServerParameters(
            command=sys.executable,
            args=["-m", "guard", "mcp", "--audit", args.audit, "--", str(server), str(repo)],
            cwd=str(repo),
        )
        print(
            f"{calls} tools/call (read_text_file / list_directory), Python SDK client,"
            f" server-filesystem {VERSION}; proxy audit log: {args.audit};"
            f" load average {os.getloadavg()[0]:.2f}"
        )
        sides = [direct, proxied]
        if args.floor:
            for mode in ("--relay", "--relay-bytes", "--relay-json"):
                sides.append(StdioServerParameters(
                    command=sys.executable, args=[__file__, mode, str(server), str(repo)],
                    cwd=str(repo),
                ))
        lat, cpu = asyncio.run(compare(sides, repo, calls))
        breakdown = stages(server, repo, calls, args.audit) if args.stages else []
    d, p = lat[0], lat[1]
    added = [pi - di for pi, di in zip(p, d, strict=True)]
    print(summary("direct", d))
    print(summary("proxied", p))
    if args.floor:
        print(summary("relay", lat[2]))
        print(summary("bytes", lat[3]))
        print(summary("json/sel", lat[4]))
    print(
        f"added latency per call (proxied minus its direct twin): median"
        f" {statistics.median(added) * 1e6:.0f} µs, p99 {percentile(added, 0.99) * 1e6:.0f} µs,"
        f" mean {(sum(p) - sum(d)) / calls * 1e6:.0f} µs"
    )
    if cpu is not None:  # less sensitive to other work on the machine than wall time
        print(
            f"guard mcp process CPU time per call (all its threads, clock ticks of"
            f" {1e6 / os.sysconf('SC_CLK_TCK'):.0f} µs): {cpu / calls * 1e6:.0f} µs"
        )
    if args.floor:
        r, b, j = lat[2], lat[3], lat[4]
        print(f"floor: ratio bare relay/direct {sum(r) / sum(d):.2f}; guard mcp/bare relay"
              f" {sum(p) / sum(r):.2f}; bytes relay/direct {sum(b) / sum(d):.2f};"
              f" selector JSON relay/direct {sum(j) / sum(d):.2f}")
    for line in breakdown:
        print(line)
    print(f"load average after the run: {os.getloadavg()[0]:.2f}")
    print(f"ratio proxied/direct (wall time of {calls} calls): {sum(p) / sum(d):.2f}")


if __name__ == "__main__":
    main()
