"""Per-call overhead of `guard mcp` against calling the MCP server directly.

Same client (the official Python SDK), same server (the real
@modelcontextprotocol/server-filesystem), same 500 calls (reads and listings of
a temporary git repository, all allowed in plan mode so both sides do the same
server work), in one run. Startup is not timed. Each call goes to both sides
back to back (alternating which goes first), so the added latency of a call is
the proxied call's time minus its direct twin's: its median and p99 are
printed, with the CPU time the `guard mcp` process spent per call (Linux), then the
ratio (proxied / direct wall time of all calls), last.

    .venv/bin/python benchmarks/mcp.py [--calls 500] [--audit all|refusals] [--quick]

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
import statistics
import subprocess
import sys
import tempfile
import time
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
    direct: StdioServerParameters, proxied: StdioServerParameters, repo: Path, calls: int
) -> tuple[list[float], list[float], float | None]:
    """Both connections open at once; each call goes to both, in alternating order, so the
    two sides see the same machine load (a warm-up of 20 calls each is not counted).
    Also the CPU time of the `guard mcp` process over the timed calls (None off Linux)."""
    with open(repo.parent / "server.stderr", "a") as errlog:
        async with (
            stdio_client(direct, errlog=errlog) as (r1, w1),
            ClientSession(r1, w1) as s1,
            stdio_client(proxied, errlog=errlog) as (r2, w2),
            ClientSession(r2, w2) as s2,
        ):
            await s1.initialize()
            await s2.initialize()
            for i in range(20):
                await call(s1, repo, i)
                await call(s2, repo, i)
            d: list[float] = []
            p: list[float] = []
            pid = proxy_pid()
            cpu_before = cpu_seconds(pid)
            for i in range(calls):
                if i % 2:
                    d.append(await call(s1, repo, i))
                    p.append(await call(s2, repo, i))
                else:
                    p.append(await call(s2, repo, i))
                    d.append(await call(s1, repo, i))
            cpu_after = cpu_seconds(pid)
            cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            return d, p, cpu


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
    args = parser.parse_args()
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
        d, p, cpu = asyncio.run(compare(direct, proxied, repo, calls))
    added = [pi - di for pi, di in zip(p, d, strict=True)]
    print(summary("direct", d))
    print(summary("proxied", p))
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
    print(f"load average after the run: {os.getloadavg()[0]:.2f}")
    print(f"ratio proxied/direct (wall time of {calls} calls): {sum(p) / sum(d):.2f}")


if __name__ == "__main__":
    main()
