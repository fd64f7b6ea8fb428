"""Benchmark: how soon ``guard ui`` shows an event, what it costs while idle, and how it
opens a long session.

Measured in one run, in a fresh git repository with a session in plan mode:

- **event -> screen**: another thread publishes a ``Decision`` event to the session's
  log (``Session.publish``, as the MCP proxy does) every ``--gap`` seconds; the time
  from the write to the cockpit drawing that line in its activity lane (the app
  running headless at 80x24; Textual paints the drawn widgets on its next frame).
  Goal: p95 <= 100 ms. Baseline in the same run: ``guard events --follow`` (its
  library loop, ``events.follow``) noticing the same kind of write.
- **idle CPU**: ``guard ui`` started as its own process on a pseudo-terminal (80x24),
  left alone for ``--idle`` seconds; user + system CPU from /proc over wall time.
  Goal: <= 1% of one core. Baseline: the same process's CPU while starting.
- **a long session**: sessions with 10,000 and 100,000 events (decisions, checklist
  updates, plan deltas); the time to read one into the cockpit and draw the first
  screen (goal: 10,000 in <= 1 s), and Python's peak memory while reading
  (tracemalloc): bounded, so the ratio 100,000 / 10,000 stays far below 10. Baseline:
  a session with one event (Textual's own start-up, headless).
- **a large plan**: the plan file of a plan session is 2 MB of markdown; the time from
  reading the state to the first screen with the plan drawn (goal: <= 1 s: the plan is
  drawn a page at a time). Baseline: the same with a 4 KB plan.

    python benchmarks/ui.py [--events 60] [--gap 0.1] [--idle 5] [--plan-mb 2] [--check]

Printed last: the ratios. ``--check`` exits 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import os
import pty
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
import tracemalloc
from pathlib import Path

from guard import effects
from guard.planning import Mode, Session
from guard.planning import event_bus as ev
from guard.planning.checklist import PlanItem, StepStatus
from guard.ui.app import CockpitApp
from guard.ui.state import Cockpit, HostLine


def no_hosts(_cwd: str) -> list[HostLine]:
    return []


def repo(base: Path, name: str) -> Path:
    root = base / name
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return Path(os.path.realpath(root))


def decision(n: int) -> ev.Decision:
    return ev.Decision(
        action=effects.Action.DENY if n % 3 == 0 else effects.Action.ALLOW,
        reason=f"bench-{n}",
        rule="agents.plan.write.deny:1 **",
        agent="plan",
        tool="Write",
        source="bench",
    )


def event_to_screen(root: Path, count: int, gap: float) -> list[float]:
    """Seconds from each publish to the cockpit drawing that line."""
    session = Session.start(root, Mode.PLAN, title="bench")
    written: dict[str, float] = {}
    seen: dict[str, float] = {}
    app = CockpitApp(Cockpit(root, hosts=no_hosts), check_hosts=False)
    original = app.draw_activity

    def draw_activity(*, full: bool = False) -> None:
        original(full=full)
        now = time.perf_counter()
        for a in list(app.source.view.activity)[-5:]:
            if a.reason.startswith("bench-") and a.reason not in seen:
                seen[a.reason] = now

    app.draw_activity = draw_activity  # type: ignore[method-assign]

    def writer() -> None:
        for n in range(count):
            time.sleep(gap)
            written[f"bench-{n}"] = time.perf_counter()
            session.publish(decision(n))

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(0.2)
            thread = threading.Thread(target=writer)
            thread.start()
            end = time.monotonic() + count * gap + 30
            while (len(seen) < count or thread.is_alive()) and time.monotonic() < end:
                await pilot.pause(0.02)
            thread.join()

    asyncio.run(main())
    return [seen[k] - t for k, t in written.items() if k in seen]


def follow_baseline(root: Path, count: int, gap: float) -> list[float]:
    """The same writes, noticed by ``events.follow`` (what ``guard events --follow`` runs)."""
    session = Session.start(root, Mode.PLAN, title="follow")
    written: dict[str, float] = {}
    out: list[float] = []
    done = threading.Event()

    def writer() -> None:
        for n in range(count):
            time.sleep(gap)
            written[f"bench-{n}"] = time.perf_counter()
            session.publish(decision(n))
        time.sleep(1)
        done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    for event in ev.follow(session, from_start=False, stop=done.is_set):
        if isinstance(event, ev.Decision) and event.reason in written:
            out.append(time.perf_counter() - written[event.reason])
    thread.join()
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(root: Path, seconds: float) -> tuple[float, float]:
    """(start-up CPU seconds, idle CPU share of one core) of `guard ui` on a pty."""
    Session.start(root, Mode.PLAN, title="idle")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from guard.cli import main; main()", "ui", "--cwd", str(root)],
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    stop = threading.Event()

    def drain() -> None:  # the terminal's reader: keep the app's writes flowing
        while not stop.is_set():
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        time.sleep(6)  # start-up, the hosts check in its worker thread, first frames
        start = cpu_seconds(proc.pid)
        t0 = time.monotonic()
        time.sleep(seconds)
        used = cpu_seconds(proc.pid) - start
        wall = time.monotonic() - t0
    finally:
        stop.set()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(master)
    return start, used / wall


def long_session(root: Path, count: int) -> tuple[float, int, int]:
    """(seconds to open and draw, peak bytes while reading, activity lines kept)."""
    session = Session.start(root, Mode.PLAN, title="long")
    batch: list[ev.Event] = []
    for n in range(count):
        if n % 50 == 0:
            batch.append(ev.PlanUpdate(plan=[PlanItem(step=f"step {n}",
                                                      status=StepStatus.IN_PROGRESS)]))  # fmt: skip
        elif n % 50 == 1:
            batch.append(ev.PlanDelta(delta=f"- line {n}\n"))
        else:
            batch.append(decision(n))
        if len(batch) == 5000:
            ev.publish_many(session, batch, sync=False)
            batch = []
    if batch:
        ev.publish_many(session, batch, sync=False)
    shown: list[float] = []

    async def main() -> None:
        t0 = time.perf_counter()
        source = Cockpit(root, hosts=no_hosts)
        app = CockpitApp(source, check_hosts=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            shown.extend([time.perf_counter() - t0, len(source.view.activity)])

    asyncio.run(main())
    tracemalloc.start()  # a second reading, for its memory only (tracemalloc slows it)
    Cockpit(root, hosts=no_hosts)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return shown[0], peak, int(shown[1])


def plan_of(size: int) -> str:
    lines = ["# A large plan", ""]
    n = total = 0
    while total < size:
        n += 1
        step = f"## Step {n}\n\nChange `module_{n}.py`: cache what step {n} reads.\n"
        lines.append(step)
        total += len(step) + 1
    return "\n".join(lines)


def plan_paint(root: Path, size: int) -> float:
    """Seconds from reading the state to the first screen with the plan drawn."""
    session = Session.start(root, Mode.PLAN, title="large")
    assert session.plan_path
    Path(session.plan_path).write_text(plan_of(size))
    shown: list[float] = []

    async def main() -> None:
        t0 = time.perf_counter()
        source = Cockpit(root, hosts=no_hosts)
        app = CockpitApp(source, check_hosts=False)
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            while not app.query(".plan-page"):
                await pilot.pause(0.01)
            shown.append(time.perf_counter() - t0)

    asyncio.run(main())
    return shown[0]


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=60)
    parser.add_argument("--gap", type=float, default=0.1)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--plan-mb", type=float, default=2.0, help="the large plan's size")
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args()
    missed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        os.environ["XDG_DATA_HOME"] = str(base / "data")  # guard's data: this run's own
        ui = event_to_screen(repo(base, "latency"), args.events, args.gap)
        tail = follow_baseline(repo(base, "follow"), args.events, args.gap)
        print(f"event -> screen ({len(ui)} of {args.events} events, one every {args.gap}s)")
        print(f"  guard ui             median {statistics.median(ui) * 1000:6.1f} ms"
              f"   p95 {p95(ui) * 1000:6.1f} ms   max {max(ui) * 1000:6.1f} ms")  # fmt: skip
        print(f"  events --follow loop median {statistics.median(tail) * 1000:6.1f} ms"
              f"   p95 {p95(tail) * 1000:6.1f} ms")  # fmt: skip
        if len(ui) < args.events or p95(ui) > 0.1:
            missed.append("event -> screen p95 <= 100 ms")
        startup, idle = idle_cpu(repo(base, "idle"), args.idle)
        print(f"idle CPU of `guard ui` on a pty: {idle * 100:.2f}% of one core over"
              f" {args.idle:.0f} s (its start-up used {startup:.2f} s of CPU)")
        if idle > 0.01:
            missed.append("idle CPU <= 1%")
        t0, _m0, _k0 = long_session(repo(base, "empty"), 1)
        print(f"open a session with 1 event: {t0:.2f} s (Textual's own start, headless)")
        t10, m10, k10 = long_session(repo(base, "long10k"), 10_000)
        t100, m100, k100 = long_session(repo(base, "long100k"), 100_000)
        print(f"open a 10,000-event session:  {t10:.2f} s, peak {m10 / 2**20:.1f} MiB while"
              f" reading, {k10} activity lines kept")
        print(f"open a 100,000-event session: {t100:.2f} s, peak {m100 / 2**20:.1f} MiB while"
              f" reading, {k100} activity lines kept")
        if t10 > 1.0:
            missed.append("10,000 events open in <= 1 s")
        small = plan_paint(repo(base, "plan4k"), 4096)
        large = plan_paint(repo(base, "plan-large"), int(args.plan_mb * 1_000_000))
        print(f"first paint of a {args.plan_mb:g} MB plan: {large:.2f} s"
              f" (a 4 KB plan: {small:.2f} s)")
        if large > 1.0:
            missed.append(f"a {args.plan_mb:g} MB plan paints in <= 1 s")
    print(f"goals: {'all met' if not missed else 'missed: ' + '; '.join(missed)}")
    print(f"ratio ui p95 / events --follow p95: {p95(ui) / p95(tail):.2f}x;"
          f" open 10k / 1 event: {t10 / t0:.2f}x;"
          f" memory 100k / 10k events: {m100 / m10:.2f}x (events 10x);"
          f" first paint {args.plan_mb:g} MB / 4 KB plan: {large / small:.2f}x")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
