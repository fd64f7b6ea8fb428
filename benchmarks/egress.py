"""Benchmark: a download through guard's egress proxy against the same download direct.

A server on 127.0.0.1 (a process of its own) sends SIZE bytes (default 100 MiB) per
request; curl downloads it to /dev/null

* **direct**: ``curl http://127.0.0.1:PORT/...``;
* **plain HTTP through the proxy**: ``curl -x PROXY http://bench.test/...``, the
  request parsed, decided and re-rendered, the response's framing read and its
  body relayed;
* **HTTPS direct** and **HTTPS through the proxy** (a CONNECT tunnel, decided once,
  its ClientHello checked, then relayed as it is);
* for reference, when ``socat`` is installed: the plain download through a TCP relay
  written in C (``socat -b 1048576``), no HTTP parsing, no decisions: what the second
  loopback connection costs by itself.

The proxy runs as it does for a confined command: a process of its own started with
``python -E -s -S`` (tests/sandbox/egress_driver.py), guard imported on the first
connection (a warm-up request pays for it, outside the figures). The four kinds are
interleaved round by round, so machine noise lands on all alike. Prints the median
throughput of each and the CPU time of every process involved (server, proxy, curl)
per GiB, which a busy machine does not distort, and last the throughput ratio proxy /
direct (goal >= 0.8x), the lower of plain HTTP and HTTPS.

    python benchmarks/egress.py [--size-mib 100] [--rounds 7]
    python benchmarks/egress.py --quick      # 32 MiB, 3 rounds
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from guard.sandbox import egress_proxy  # noqa: E402

DRIVER = REPO / "tests" / "sandbox" / "egress_driver.py"

SERVER = r"""
import socket, ssl, sys, threading
size = int(sys.argv[1]); cert = sys.argv[2] if len(sys.argv) > 2 else ""
chunk = memoryview(b"\xa5" * (1 << 20))
def serve(conn):
    try:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, buf = buf.split(b"\r\n\r\n", 1)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         b"Content-Length: %d\r\n\r\n" % size)
            left = size
            while left:
                n = min(left, len(chunk)); conn.sendall(chunk[:n]); left -= n
    except OSError:
        pass
    finally:
        conn.close()
lsock = socket.socket(); lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsock.bind(("127.0.0.1", 0)); lsock.listen(16)
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert + "/cert.pem", cert + "/key.pem")
    lsock = ctx.wrap_socket(lsock, server_side=True)
print(lsock.getsockname()[1], flush=True)
while True:
    try:
        c, _ = lsock.accept()
    except (OSError, ssl.SSLError):
        continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def start(argv: list[str], **kw: object) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            **kw)  # type: ignore[call-overload]
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def download(args: list[str], size: int) -> tuple[float, float]:
    """(wall seconds, curl's CPU seconds) of one download, checked for its size."""
    t, c = time.perf_counter(), children_cpu()
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{size_download}", *args],
                         capture_output=True, text=True, check=True)
    took, cpu = time.perf_counter() - t, children_cpu() - c
    if int(out.stdout) != size:
        raise SystemExit(f"curl {' '.join(args)}: got {out.stdout} bytes, expected {size}")
    return took, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="32 MiB, 3 rounds")
    opts = ap.parse_args()
    if opts.quick:
        opts.size_mib, opts.rounds = 32, 3
    for tool in ("curl", "openssl"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is needed (scripts/test.sh installs it)")
    size = opts.size_mib << 20
    tmp = Path(tempfile.mkdtemp(prefix="guard-bench-egress-"))
    procs: list[subprocess.Popen[str]] = []
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-subj", "/CN=bench.test", "-addext", "subjectAltName=DNS:bench.test",
             "-keyout", str(tmp / "key.pem"), "-out", str(tmp / "cert.pem")],
            check=True, capture_output=True)
        plain, port = start([sys.executable, "-c", SERVER, str(size)])
        tls, tls_port = start([sys.executable, "-c", SERVER, str(size), str(tmp)])
        procs += [plain, tls]
        (tmp / "repo").mkdir()
        subprocess.run(["git", "init", "-q", str(tmp / "repo")], check=True)
        policy = tmp / "policy.toml"
        policy.write_text(
            'version = 1\nextends = ["builtin:default"]\n[agents.plan.network]\n'
            'allow = ["bench.test:80", "bench.test:443"]\n[egress]\n'
            f'resolve = {{ "bench.test:80" = "127.0.0.1:{port}",'
            f' "bench.test:443" = "127.0.0.1:{tls_port}" }}\n')
        spec = egress_proxy.EgressSpec("plan", str(tmp / "repo"), str(policy), "hook",
                                 str(tmp / "audit.jsonl"))
        proxy, ready = start([sys.executable, "-E", "-s", "-S", str(DRIVER), "--sandbox",
                              str(Path(egress_proxy.__file__).parent), "--spec", spec.to_argv()[1]])
        procs.append(proxy)
        via = f"http://127.0.0.1:{ready.split()[1]}"
        # for reference: a plain TCP relay in C (socat, 1 MiB buffers) between the same
        # endpoints, when installed: what a second loopback connection costs by itself
        socat_port = 0
        if shutil.which("socat"):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                socat_port = probe.getsockname()[1]
            relay = subprocess.Popen(
                ["socat", "-b", "1048576", f"TCP-LISTEN:{socat_port},bind=127.0.0.1,reuseaddr,"
                 "fork", f"TCP:127.0.0.1:{port}"], stdin=subprocess.DEVNULL)
            procs.append(relay)  # type: ignore[arg-type]
            time.sleep(0.5)
        cacert = ["--cacert", str(tmp / "cert.pem")]
        kinds = {
            "direct": [f"http://127.0.0.1:{port}/d"],
            "proxy, plain HTTP": ["-x", via, "http://bench.test/d"],
            **({"socat relay (reference)": [f"http://127.0.0.1:{socat_port}/d"]}
               if socat_port else {}),
            "direct, HTTPS": [*cacert, "--resolve", f"bench.test:{tls_port}:127.0.0.1",
                              f"https://bench.test:{tls_port}/d"],
            "proxy, HTTPS (CONNECT)": [*cacert, "-x", via, "https://bench.test/d"],
        }
        for args in kinds.values():  # warm-up: the proxy imports guard on its first call
            download(args, size)
        times: dict[str, list[float]] = {k: [] for k in kinds}
        cpu: dict[str, list[float]] = {k: [] for k in kinds}  # every process, per download
        proxy_cpu: dict[str, list[float]] = {k: [] for k in kinds}  # the proxy alone
        load = os.getloadavg()[0]
        servers = {"direct": plain, "proxy, plain HTTP": plain, "direct, HTTPS": tls,
                   "proxy, HTTPS (CONNECT)": tls, "socat relay (reference)": plain}
        for r in range(opts.rounds):
            for kind, args in kinds.items():
                p0, s0 = cpu_of(proxy.pid), cpu_of(servers[kind].pid)
                took, curl_cpu = download(args, size)
                p1, s1 = cpu_of(proxy.pid), cpu_of(servers[kind].pid)
                times[kind].append(took)
                cpu[kind].append(p1 - p0 + s1 - s0 + curl_cpu)
                proxy_cpu[kind].append(p1 - p0)
            log(f"round {r + 1}/{opts.rounds}: " + ", ".join(
                f"{k} {size / times[k][-1] / 2**20:.0f} MiB/s" for k in kinds))
        speed = {k: size / statistics.median(v) / 2**20 for k, v in times.items()}
        # CPU time is counted in clock ticks (10 ms): summed over the rounds, not a median
        per_gib = {k: sum(v) / (len(v) * size / 2**30) for k, v in cpu.items()}
        print(f"{opts.size_mib} MiB per download, {opts.rounds} rounds, load average"
              f" {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        for kind, mib_s in speed.items():
            own = sum(proxy_cpu[kind]) / (len(proxy_cpu[kind]) * size / 2**30)
            if kind.startswith("socat"):
                print(f"  {kind:24} {mib_s:8.0f} MiB/s (median)   (socat's CPU not counted)")
                continue
            print(f"  {kind:24} {mib_s:8.0f} MiB/s (median)   CPU per GiB: all processes"
                  f" {per_gib[kind]:.2f} s, the proxy's {own:.2f} s")
        print(f"CPU per byte, through the proxy / direct: plain HTTP"
              f" x{per_gib['proxy, plain HTTP'] / per_gib['direct']:.2f}, HTTPS"
              f" x{per_gib['proxy, HTTPS (CONNECT)'] / per_gib['direct, HTTPS']:.2f}")
        if "socat relay (reference)" in speed:
            print(f"a C relay (socat) / direct, for reference:"
                  f" x{speed['socat relay (reference)'] / speed['direct']:.2f}")
        http = speed["proxy, plain HTTP"] / speed["direct"]
        https = speed["proxy, HTTPS (CONNECT)"] / speed["direct, HTTPS"]
        print(f"plain HTTP through the proxy / direct: x{http:.2f}")
        print(f"HTTPS through the proxy / direct: x{https:.2f}")
        worst = min(http, https)
        print(f"download through guard's egress proxy / direct (the lower): x{worst:.2f}"
              f" (goal >= 0.80: {'met' if worst >= 0.8 else 'NOT met'})")
        return 0
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
