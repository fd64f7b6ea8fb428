"""The fleet report's pages: a text table and one self-contained HTML page with charts
(inline CSS and SVG, nothing fetched). What they show is :class:`guard.fleet.report.FleetReport`'s;
JSON is its own :meth:`~guard.fleet.report.FleetReport.to_json`.
"""

from __future__ import annotations

import html
from typing import IO, Any

from guard.fleet.report import DECISIONS, FleetReport, _nest
from guard.plaintext import visible


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
    lines += _verification_lines(rep)
    return visible("\n".join(lines)) + "\n"  # machine and agent names come from the logs


def _verification_lines(rep: FleetReport) -> list[str]:
    hosts = ", ".join(f"{h} ({rep.machines[h].unverifiable})" for h in rep.unverifiable_hosts())
    out = [f"unverifiable records (counted for nothing): {rep.unverifiable}"
           + (f": {hosts}" if hosts else "")]
    out += [f"  {b['where']}: {b['hostname']}: {b['problem']}"
            for b in rep.unverifiable_records[:10]]
    gaps = rep.gaps()
    out.append("chains with records missing: " + (", ".join(
        f"{g['log']} on {g['hostname']} (uid {g['uid']}): {g['missing']} of records"
        f" {g['first']} to {g['last']}" for g in gaps[:10]) or "none"))
    if not rep.keys:
        out.append(f"MACs not checked: {rep.unchecked} records (give each machine's audit key"
                   " with --key to verify them)")
    elif rep.unchecked:
        out.append(f"MACs not checked: {rep.unchecked} records (the line before each is out"
                   " of reach)")
    return out


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
              f" {_esc(', '.join(rep.unconfined_hosts()) or 'none')}</li>"
              + "".join(f"<li>{_esc(line.strip())}</li>" for line in _verification_lines(rep))
              + "</ul>\n"
              "</body></html>\n")
