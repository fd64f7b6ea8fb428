"""``guard review --fleet PATH``: what a fleet's records say, streamed with bounded memory.

PATH is a file of JSON lines (what the central rsyslog writes, docs/fleet.md) or a
directory of them (guard's audit logs, ``*.jsonl`` and rotated ``*.jsonl.N``, at any
depth). Records are read line by line and folded into counters whose size depends on
the fleet (machines, sessions, rules, policy digests, minutes of the period), never on
the number of records. A record seen twice (RELP resends after an outage) is counted
once when its ``record_id`` is among the last :data:`DEDUP_WINDOW` ids of its reader.
Large inputs are split between worker processes (one per CPU), each folding its share.

The report: machines (records, sessions, the policy digest each runs last, guard and
host agent versions), decisions by host agent, by agent and by rule, machines running a
policy digest other than the fleet's current one (the digest most machines run last),
machines where the monitor saw changes a hook should have refused (a skipped or bypassed
hook), and confinement unavailable (notices). Renderings: a text table, JSON, and one
self-contained HTML page with charts (inline SVG, nothing fetched).
"""

from __future__ import annotations

import html
import json
import multiprocessing
import os
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from guard.effects import GuardError
from guard.plaintext import visible

try:  # a faster parser when installed (the ``fleet`` extra); the same values
    import orjson

    _loads: Any = orjson.loads
except ImportError:  # pragma: no cover - depends on the environment
    _loads = json.loads

DEDUP_WINDOW = 100_000
SPLIT_BYTES = 64 << 20  # inputs larger than this are split between processes
DECISIONS = ("allow", "allow_confined", "ask", "deny")
#: the fields the report reads: each a string or missing
_TEXT_FIELDS = (
    "record_id", "hostname", "session", "session_id", "ts", "policy_digest", "guard_version",
    "host_agent", "host_agent_version", "type", "decision", "agent", "rule", "source",
)  # fmt: skip


@dataclass
class Machine:
    records: int = 0
    sessions: set[str] = field(default_factory=set)
    last_ts: str = ""
    digest: str | None = None  # the policy digest of its latest record
    digests: dict[str, int] = field(default_factory=dict)
    versions: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)
    violations: int = 0
    unconfined: int = 0

    def merge(self, o: Machine) -> None:
        self.records += o.records
        self.sessions |= o.sessions
        if o.last_ts > self.last_ts:
            self.last_ts, self.digest = o.last_ts, o.digest
        for d, n in o.digests.items():
            self.digests[d] = self.digests.get(d, 0) + n
        self.versions |= o.versions
        self.agents |= o.agents
        self.violations += o.violations
        self.unconfined += o.unconfined


@dataclass
class FleetReport:
    """The folded records."""

    records: int = 0
    duplicates: int = 0
    unreadable: int = 0
    machines: dict[str, Machine] = field(default_factory=dict)
    #: (host agent, agent, decision, rule of a deny or ask) -> verdicts: one count per record
    verdicts: dict[tuple[str, str, str, str | None], int] = field(default_factory=dict)
    per_minute: dict[tuple[str, str], int] = field(default_factory=dict)  # (minute, decision)
    unconfined: list[dict[str, Any]] = field(default_factory=list)
    first_error: str | None = None
    _ids: set[str] = field(default_factory=set, repr=False)
    _ring: deque[str] = field(default_factory=lambda: deque(maxlen=DEDUP_WINDOW), repr=False)

    # -- folding ---------------------------------------------------------------------

    def seen(self, rid: str) -> bool:
        """Whether ``rid`` is among the last :data:`DEDUP_WINDOW` ids (and remember it)."""
        ids = self._ids
        if rid in ids:
            return True
        ring = self._ring
        if len(ring) == DEDUP_WINDOW:
            ids.discard(ring[0])
        ring.append(rid)
        ids.add(rid)
        return False

    def add(self, r: dict[str, Any]) -> None:
        """Fold one record in; TypeError (and nothing counted) for a field of the wrong kind."""
        get = r.get
        for name in _TEXT_FIELDS:
            value = get(name)
            if value is not None and type(value) is not str:
                raise TypeError(f"{name} is not a string")
        rid = get("record_id")
        if rid is not None and self.seen(rid):
            self.duplicates += 1
            return
        self.records += 1
        host = get("hostname") or "(unknown)"
        m = self.machines.get(host)
        if m is None:
            m = self.machines[host] = Machine()
        m.records += 1
        session = get("session") or get("session_id")
        if session:
            m.sessions.add(session)
        ts = get("ts") or ""
        digest = get("policy_digest")
        if digest is not None:
            m.digests[digest] = m.digests.get(digest, 0) + 1
            if ts >= m.last_ts:
                m.last_ts, m.digest = ts, digest
        elif ts > m.last_ts:
            m.last_ts = ts
        version = get("guard_version")
        if version is not None and version not in m.versions:
            m.versions.add(version)
        agent_host = get("host_agent")
        if agent_host:
            v = get("host_agent_version")
            m.agents.add(f"{agent_host} {v}" if v else agent_host)
        kind = get("type")
        if kind == "verdict":
            decision = str(get("decision"))
            rule = (get("rule") or "?") if decision == "deny" or decision == "ask" else None
            key = (agent_host or get("source") or "?", get("agent") or "?", decision, rule)
            verdicts = self.verdicts
            verdicts[key] = verdicts.get(key, 0) + 1
            minute = (ts[:16], decision)
            self.per_minute[minute] = self.per_minute.get(minute, 0) + 1
        elif kind == "violation":
            m.violations += 1
        elif kind == "notice" and _unconfined(r):
            m.unconfined += 1
            if len(self.unconfined) < 100:
                self.unconfined.append({"hostname": host, "ts": ts, "event": get("event"),
                                        "message": get("message")})

    def merge(self, o: FleetReport) -> None:
        self.records += o.records
        self.duplicates += o.duplicates
        self.unreadable += o.unreadable
        self.first_error = self.first_error or o.first_error
        for host, m in o.machines.items():
            if host in self.machines:
                self.machines[host].merge(m)
            else:
                self.machines[host] = m
        for k, n in o.verdicts.items():
            self.verdicts[k] = self.verdicts.get(k, 0) + n
        for mk, n in o.per_minute.items():
            self.per_minute[mk] = self.per_minute.get(mk, 0) + n
        self.unconfined = (self.unconfined + o.unconfined)[:100]

    # -- what it says ----------------------------------------------------------------

    def _by(self, index: int) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for key, n in self.verdicts.items():
            out[(str(key[index]), key[2])] += n
        return out

    @property
    def by_host_agent(self) -> Counter[tuple[str, str]]:
        return self._by(0)

    @property
    def by_agent(self) -> Counter[tuple[str, str]]:
        return self._by(1)

    @property
    def by_rule(self) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for key, n in self.verdicts.items():
            if key[3] is not None:
                out[(key[3], key[2])] += n
        return out

    @property
    def current_digest(self) -> str | None:
        """The policy digest most machines run last (ties: the latest seen)."""
        votes = Counter(m.digest for m in self.machines.values() if m.digest)
        if not votes:
            return None
        top = max(votes.values())
        tied = [d for d, n in votes.items() if n == top]
        latest = {m.digest: m.last_ts for m in self.machines.values() if m.digest in tied}
        return max(tied, key=lambda d: latest.get(d, ""))

    def stale(self) -> list[str]:
        current = self.current_digest
        return sorted(h for h, m in self.machines.items() if m.digest and m.digest != current)

    def skipped(self) -> list[str]:
        return sorted(h for h, m in self.machines.items() if m.violations)

    def unconfined_hosts(self) -> list[str]:
        return sorted(h for h, m in self.machines.items() if m.unconfined)

    def findings(self) -> bool:
        return bool(self.stale() or self.skipped() or self.unconfined_hosts())

    def sessions(self) -> int:
        return sum(len(m.sessions) for m in self.machines.values())

    def to_json(self) -> dict[str, Any]:
        current = self.current_digest
        return {
            "records": self.records,
            "duplicates": self.duplicates,
            "unreadable_lines": self.unreadable,
            "machines": [
                {"hostname": h, "records": m.records, "sessions": len(m.sessions),
                 "last_seen": m.last_ts, "policy_digest": m.digest,
                 "stale_policy": bool(m.digest and m.digest != current),
                 "policy_digests": dict(m.digests), "guard_versions": sorted(m.versions),
                 "host_agents": sorted(m.agents), "monitor_violations": m.violations,
                 "confinement_unavailable": m.unconfined}
                for h, m in sorted(self.machines.items())
            ],
            "sessions": self.sessions(),
            "current_policy_digest": current,
            "stale_policy": self.stale(),
            "hooks_skipped": self.skipped(),
            "confinement_unavailable": self.unconfined_hosts(),
            "unconfined_notices": self.unconfined,
            "decisions_by_host_agent": _nest(self.by_host_agent),
            "decisions_by_agent": _nest(self.by_agent),
            "top_rules": [{"rule": rule, "decision": d, "count": n}
                          for (rule, d), n in self.by_rule.most_common(20)],
            "decisions_over_time": [{"start": start, **counts}
                                    for start, counts in self.timeline()],
        }

    def timeline(self, bars: int = 48) -> list[tuple[str, dict[str, int]]]:
        """The per-minute counts folded into at most ``bars`` equal periods."""
        minutes = sorted({m for m, _ in self.per_minute})
        if not minutes:
            return []
        step = max(1, -(-len(minutes) // bars))
        out: list[tuple[str, dict[str, int]]] = []
        for i in range(0, len(minutes), step):
            chunk = minutes[i : i + step]
            counts = {d: sum(self.per_minute.get((m, d), 0) for m in chunk) for d in DECISIONS}
            out.append((chunk[0], counts))
        return out


def _unconfined(r: dict[str, Any]) -> bool:
    event = str(r.get("event") or "")
    message = str(r.get("message") or "").lower()
    return "unconfined" in event or ("landlock" in message and "unavailable" in message)


def _nest(c: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (key, decision), n in sorted(c.items()):
        out.setdefault(key, {})[decision] = n
    return out


# -- reading ---------------------------------------------------------------------------


def inputs(path: Path) -> list[Path]:
    """The files to read: ``path`` itself, or every JSON-lines log below it."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise GuardError(f"--fleet {path}: no such file or directory; give the central"
                         " rsyslog's JSON lines or a directory of audit logs")
    found = [p for p in path.rglob("*") if p.is_file() and (p.suffix == ".jsonl" or (
        ".jsonl." in p.name and p.name.rsplit(".", 1)[1].isdigit()))]
    if not found:
        raise GuardError(f"--fleet {path}: no *.jsonl files in it")
    return sorted(found)


#: bytes before a share's start whose record ids seed its duplicate window (a resent record
#: lands soon after the first copy: nothing is written while the collector is down)
SEED_BYTES = 16 << 20


def _seed(report: FleetReport, f: IO[bytes], start: int) -> None:
    """Remember the ids of the records just before ``start`` (read by the share before)."""
    f.seek(max(0, start - SEED_BYTES))
    if f.tell():
        f.readline()
    pos = f.tell()
    for line in f:
        if pos >= start:
            break
        pos += len(line)
        try:
            rid = _loads(line).get("record_id")
        except (ValueError, AttributeError):
            continue
        if isinstance(rid, str):
            report.seen(rid)


def _fold(report: FleetReport, f: IO[bytes], start: int, end: int, name: str) -> None:
    if start:
        _seed(report, f, start)
    if start:  # a line is read by the share it starts in
        f.seek(start - 1)
        f.readline()
    pos = f.tell()
    for line in f:
        if pos >= end:
            break
        at, pos = pos, pos + len(line)
        if len(line) < 3 and not line.strip():  # a blank line (no copy of a long one)
            continue
        try:
            r = _loads(line)
            if not isinstance(r, dict):
                raise ValueError("not an object")
        except ValueError:
            report.unreadable += 1
            report.first_error = report.first_error or (
                f"{name}: the line at byte {at} is not a JSON record; fix or remove it")
            continue
        try:
            report.add(r)
        except (TypeError, ValueError, AttributeError):  # a field of the wrong kind
            report.unreadable += 1
            report.first_error = report.first_error or (
                f"{name}: the record at byte {at} has a field of the wrong kind; fix or remove it")


def _shares(files: list[Path], workers: int) -> list[list[tuple[Path, int, int]]]:
    """Each worker's (file, start, end) pieces: big files split by bytes, others whole."""
    pieces: list[tuple[Path, int, int]] = []
    for p in files:
        size = p.stat().st_size
        n = workers if size > SPLIT_BYTES else 1
        step = -(-size // n) if size else 0
        pieces += [(p, i * step, min(size, (i + 1) * step)) for i in range(n)] if size else []
    shares: list[list[tuple[Path, int, int]]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for piece in sorted(pieces, key=lambda x: x[1] - x[2]):
        i = loads.index(min(loads))
        shares[i].append(piece)
        loads[i] += piece[2] - piece[1]
    return [s for s in shares if s]


def _run_share(share: list[tuple[Path, int, int]]) -> FleetReport:
    report = FleetReport()
    for path, start, end in share:
        with open(path, "rb") as f:
            _fold(report, f, start, end, str(path))
    return report


def build(path: Path, workers: int | None = None) -> FleetReport:
    """Read ``path`` (see :func:`inputs`) into one :class:`FleetReport`."""
    files = inputs(path)
    workers = workers or min(os.cpu_count() or 1, 8)
    total = sum(p.stat().st_size for p in files)
    shares = _shares(files, workers if total > SPLIT_BYTES else 1)
    if len(shares) <= 1:
        return _run_share(shares[0]) if shares else FleetReport()

    with multiprocessing.get_context("fork").Pool(len(shares)) as pool:
        parts = pool.map(_run_share, shares)
    out = parts[0]
    for p in parts[1:]:
        out.merge(p)
    return out


# -- renderings --------------------------------------------------------------------------


def _short(digest: str | None) -> str:
    return "-" if not digest else digest.removeprefix("sha256:")[:12]


def to_table(rep: FleetReport) -> str:
    lines = [f"guard fleet report: {rep.records} records from {len(rep.machines)} machines,"
             f" {rep.sessions()} sessions ({rep.duplicates} duplicates dropped)"]
    if rep.unreadable:
        lines.append(f"  {rep.unreadable} lines were not records ({rep.first_error})")
    current = rep.current_digest
    lines.append(f"current policy digest: {_short(current)}")
    lines.append("")
    lines.append(f"{'machine':<24} {'records':>8} {'sessions':>8}  {'policy':<12}  "
                 f"{'violations':>10}  {'unconfined':>10}  host agents")
    for h, m in sorted(rep.machines.items()):
        mark = " STALE" if m.digest and m.digest != current else ""
        lines.append(f"{h[:24]:<24} {m.records:>8} {len(m.sessions):>8}  {_short(m.digest):<12}"
                     f"  {m.violations:>10}  {m.unconfined:>10}  {', '.join(sorted(m.agents))}"
                     f"{mark}")
    for title, counter in (("decisions by host agent", rep.by_host_agent),
                           ("decisions by agent", rep.by_agent)):
        lines += ["", f"{title}:"]
        for key, counts in _nest(counter).items():
            shown = ", ".join(f"{d} {n}" for d, n in sorted(counts.items()))
            lines.append(f"  {key:<30} {shown}")
    lines += ["", "top rules (deny and ask):"]
    for (rule, d), n in rep.by_rule.most_common(10):
        lines.append(f"  {n:>8}  {d:<5} {rule}")
    lines += ["", f"stale policy: {', '.join(rep.stale()) or 'none'}",
              f"hooks skipped (monitor violations): {', '.join(rep.skipped()) or 'none'}",
              f"confinement unavailable: {', '.join(rep.unconfined_hosts()) or 'none'}"]
    return visible("\n".join(lines)) + "\n"  # machine and agent names come from the logs


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:75em;color:#1d2330}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse}td,th{padding:.25em .6em;text-align:left;
border-bottom:1px solid #e3e6ec}.num{text-align:right}.stale{background:#fff6dc}
.bad{background:#fde8e8}.meta{color:#667085}svg text{font:11px system-ui,sans-serif}
.chart{margin:.5em 0 1.5em}
"""
COLORS = {"allow": "#1b7f3b", "allow_confined": "#2f9e8f", "ask": "#d29b00", "deny": "#a4161a"}


def _esc(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _timeline_svg(rep: FleetReport) -> str:
    rows = rep.timeline()
    if not rows:
        return "<p class=\"meta\">no decisions</p>"
    w, h, pad = 900, 220, 30
    top = max(sum(c.values()) for _, c in rows) or 1
    bw = (w - pad) / len(rows)
    parts = [f'<svg class="chart" id="timeline" width="{w}" height="{h + 40}"'
             f' role="img" aria-label="decisions over time">']
    for i, (start, counts) in enumerate(rows):
        y = float(h)
        for d in DECISIONS:
            n = counts.get(d, 0)
            if not n:
                continue
            bh = n / top * (h - 10)
            y -= bh
            parts.append(f'<rect class="bar {d}" x="{pad + i * bw:.1f}" y="{y:.1f}"'
                         f' width="{max(bw - 2, 1):.1f}" height="{bh:.1f}" fill="{COLORS[d]}">'
                         f"<title>{_esc(start)}: {d} {n}</title></rect>")
    parts.append(f'<text x="{pad}" y="{h + 16}">{_esc(rows[0][0])}</text>')
    parts.append(f'<text x="{w - 160}" y="{h + 16}">{_esc(rows[-1][0])}</text>')
    parts.append(f'<text x="0" y="12">{top}</text>')
    x = pad
    for d in DECISIONS:
        parts.append(f'<rect x="{x}" y="{h + 24}" width="10" height="10" fill="{COLORS[d]}"/>'
                     f'<text x="{x + 14}" y="{h + 33}">{d}</text>')
        x += 110
    return "".join(parts) + "</svg>"


def _rules_svg(rep: FleetReport) -> str:
    top = rep.by_rule.most_common(10)
    if not top:
        return "<p class=\"meta\">no refusals</p>"
    most = top[0][1]
    w, row = 900, 24
    parts = [f'<svg class="chart" id="rules" width="{w}" height="{row * len(top) + 10}"'
             ' role="img" aria-label="top rules">']
    for i, ((rule, d), n) in enumerate(top):
        bw = n / most * 380
        y = i * row + 4
        parts.append(f'<rect class="rule-bar" x="0" y="{y}" width="{bw:.1f}" height="{row - 6}"'
                     f' fill="{COLORS.get(d, "#888")}"><title>{_esc(rule)}</title></rect>'
                     f'<text x="{bw + 6:.1f}" y="{y + 13}">{n} {d} {_esc(rule[:80])}</text>')
    return "".join(parts) + "</svg>"


def _matrix(rep: FleetReport) -> str:
    digests = sorted({d for m in rep.machines.values() for d in m.digests})
    current = rep.current_digest
    head = "".join(f"<th title=\"{_esc(d)}\">{_esc(_short(d))}"
                   f"{' (current)' if d == current else ''}</th>" for d in digests)
    out = [f'<table id="matrix"><tr><th>machine</th>{head}</tr>']
    top = max((n for m in rep.machines.values() for n in m.digests.values()), default=1)
    for host, m in sorted(rep.machines.items()):
        cells = []
        for d in digests:
            n = m.digests.get(d, 0)
            alpha = 0.12 + 0.75 * n / top if n else 0
            last = " ◀ last" if d == m.digest else ""
            cells.append(f'<td class="num cell" style="background:rgba(52,84,209,{alpha:.2f})">'
                         f"{n or ''}{last}</td>")
        cls = ' class="stale"' if m.digest and m.digest != current else ""
        out.append(f"<tr{cls}><td>{_esc(host)}</td>{''.join(cells)}</tr>")
    return "\n".join(out) + "</table>"


def write_html(rep: FleetReport, out: IO[str]) -> None:
    """One self-contained page: inline CSS and SVG, nothing fetched."""
    out.write("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              f"<title>guard fleet report</title><style>{_CSS}</style></head><body>\n"
              "<h1>guard fleet report</h1>\n"
              f"<p class=\"meta\">{rep.records} records from {len(rep.machines)} machines,"
              f" {rep.sessions()} sessions, {rep.duplicates} duplicates dropped; current"
              f" policy digest {_esc(_short(rep.current_digest))}</p>\n")
    out.write("<h2>Decisions over time</h2>\n" + _timeline_svg(rep) + "\n")
    out.write("<h2>Top rules</h2>\n" + _rules_svg(rep) + "\n")
    out.write("<h2>Machines &times; policy digest</h2>\n" + _matrix(rep) + "\n")
    out.write("<h2>Machines</h2>\n<table id=\"machines\"><tr><th>machine</th><th>records</th>"
              "<th>sessions</th><th>policy</th><th>monitor violations</th>"
              "<th>confinement unavailable</th><th>host agents</th><th>guard</th></tr>\n")
    current = rep.current_digest
    for h, m in sorted(rep.machines.items()):
        cls = "bad" if m.violations or m.unconfined else (
            "stale" if m.digest and m.digest != current else "")
        out.write(f"<tr class=\"{cls}\"><td>{_esc(h)}</td><td class=\"num\">{m.records}</td>"
                  f"<td class=\"num\">{len(m.sessions)}</td><td>{_esc(_short(m.digest))}"
                  f"{' STALE' if cls == 'stale' else ''}</td>"
                  f"<td class=\"num\">{m.violations}</td><td class=\"num\">{m.unconfined}</td>"
                  f"<td>{_esc(', '.join(sorted(m.agents)))}</td>"
                  f"<td>{_esc(', '.join(sorted(m.versions)))}</td></tr>\n")
    out.write("</table>\n<h2>Decisions by host agent</h2>\n<table id=\"by-host\">"
              "<tr><th>host agent</th>" + "".join(f"<th>{d}</th>" for d in DECISIONS) + "</tr>")
    for key, counts in _nest(rep.by_host_agent).items():
        out.write(f"<tr><td>{_esc(key)}</td>"
                  + "".join(f"<td class=\"num\">{counts.get(d, 0)}</td>" for d in DECISIONS)
                  + "</tr>")
    out.write("</table>\n")
    out.write(f"<h2>Findings</h2>\n<ul id=\"findings\"><li>stale policy:"
              f" {_esc(', '.join(rep.stale()) or 'none')}</li>"
              f"<li>hooks skipped (monitor violations):"
              f" {_esc(', '.join(rep.skipped()) or 'none')}</li>"
              f"<li>confinement unavailable:"
              f" {_esc(', '.join(rep.unconfined_hosts()) or 'none')}</li></ul>\n"
              "</body></html>\n")


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of ``path`` (see :func:`inputs`), in file order (tests, exports)."""
    for p in inputs(path):
        with open(p, "rb") as f:
            for line in f:
                if line.strip():
                    r = _loads(line)
                    if isinstance(r, dict):
                        yield r
