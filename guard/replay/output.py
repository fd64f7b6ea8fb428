"""Replay output: the summary, and the JSON, SARIF 2.1.0 and HTML renderings."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import IO, Any

from guard.replay.model import ReplayResult


@dataclass
class Summary:
    """Counts over a replay: calls, allowed, asked, denied, sessions, blocked calls by rule."""

    calls: int = 0
    allowed: int = 0
    asked: int = 0
    denied: int = 0
    sessions: set[tuple[str, str]] = field(default_factory=set)
    by_rule: Counter[str] = field(default_factory=Counter)
    #: allowed to run confined (the hook's confiner), counted in ``allowed`` too
    confined: int = 0
    #: the transcripts' cwds that do not exist here (paths re-rooted through an ancestor)
    missing: set[str] = field(default_factory=set)

    def add(self, r: ReplayResult) -> None:
        self.calls += 1
        self.sessions.add((r.call.host, r.call.session or r.call.file))
        if r.resolved and r.call.cwd and not r.resolved.startswith("re-rooted:"):
            self.missing.add(r.call.cwd)
        if r.decision == "allow_confined":
            self.confined += 1
        if r.decision == "deny":
            self.denied += 1
        elif r.decision == "ask":
            self.asked += 1
        else:
            self.allowed += 1
        if r.blocked:
            self.by_rule[r.rule] += 1

    @property
    def blocked(self) -> int:
        return self.denied + self.asked

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "allowed": self.allowed, "confined": self.confined,
                "asked": self.asked, "denied": self.denied, "sessions": len(self.sessions),
                "by_rule": dict(self.by_rule.most_common()),
                "missing_cwds": sorted(self.missing)}

    def missing_note(self) -> str | None:
        """The warning for transcripts whose folder does not exist here, or None."""
        if not self.missing:
            return None
        where = ", ".join(sorted(self.missing))
        return (
            f"NOTE: {len(self.missing)} transcript folder(s) do not exist here ({where}):"
            " their paths were re-rooted through the nearest existing folder, so these"
            " decisions may differ from the live ones; replay with --cwd DIR against a"
            " checkout of that project"
        )

    def lines(self) -> list[str]:
        confined = f" ({self.confined} of them confined)" if self.confined else ""
        out = [f"{self.calls} calls in {len(self.sessions)} sessions: {self.allowed} allowed"
               f"{confined}, {self.asked} asked, {self.denied} denied"]
        out += [f"  {n:>5}  {rule}" for rule, n in self.by_rule.most_common()]
        note = self.missing_note()
        return [note, *out] if note else out


def short(value: Any, width: int = 60) -> str:
    """A tool input on one line, cut to ``width`` characters."""
    if isinstance(value, dict):
        for key in ("command", "cmd", "file_path", "filePath", "path", "input", "pattern", "url"):
            if isinstance(value.get(key), str | list):
                value = value[key]
                break
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


#: ``schema_version`` of guard's JSON outputs (docs/json.md)
SCHEMA_VERSION = 1


def write_json(results: Iterable[ReplayResult], out: IO[str]) -> Summary:
    """One JSON object, as every guard JSON output: ``schema_version``, ``calls`` (one
    record per call, written as the results stream in) and the ``summary``."""
    s = Summary()
    out.write(f'{{"schema_version": {SCHEMA_VERSION}, "calls": [')
    for i, r in enumerate(results):
        s.add(r)
        out.write(("," if i else "") + "\n  " + json.dumps(r.to_json(), ensure_ascii=False))
    out.write("\n]" if s.calls else "]")
    out.write(', "summary": ' + json.dumps(s.to_json(), ensure_ascii=False) + "}\n")
    return s


def sarif(results: Iterable[ReplayResult], agent: str, version: str) -> tuple[dict[str, Any],
                                                                              Summary]:
    """A SARIF 2.1.0 log: one result per denied or asked call, located at its transcript line."""
    s = Summary()
    found: list[dict[str, Any]] = []
    rules: dict[str, int] = {}
    for r in results:
        s.add(r)
        if not r.blocked:
            continue
        rules.setdefault(r.rule, len(rules))
        found.append({
            "ruleId": r.rule, "ruleIndex": rules[r.rule],
            "level": "error" if r.decision == "deny" else "warning",
            "message": {"text": f"{r.call.tool} {short(r.call.input)}: the {agent} agent"
                                f" would {'be refused' if r.decision == 'deny' else 'ask'}:"
                                f" {r.reason}"},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": r.call.file},
                "region": {"startLine": r.call.line}}}],
            "properties": {"decision": r.decision, "host": r.call.host,
                           "session": r.call.session, "time": r.call.time,
                           "cwd": r.call.cwd, "index": r.index},
        })  # fmt: skip
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "guard replay", "version": version,
                "rules": [{"id": rule, "shortDescription": {"text": rule}} for rule in rules],
            }},
            "results": found,
        }],
    }  # fmt: skip
    return log, s


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:72em;color:#1d2330}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;width:100%}td,th{padding:.3em .6em;vertical-align:top;
text-align:left;border-bottom:1px solid #e3e6ec}code{font:12px ui-monospace,monospace}
.summary td{border:0}.deny{background:#fde8e8}.ask{background:#fff6dc}
.badge{font-weight:600;border-radius:3px;padding:0 .4em}.deny .badge{color:#a4161a}
.ask .badge{color:#8a5a00}.allow .badge{color:#1b7f3b}.reason{color:#5a2025;font-size:.92em}
.meta{color:#667085;font-size:.9em}.side{color:#6941c6;font-size:.85em}
"""


def _esc(text: Any) -> str:
    return html.escape("" if text is None else str(text))


def write_html(results: Iterable[ReplayResult], out: IO[str], agent: str, policy: str) -> Summary:
    """One self-contained HTML page (inline CSS, nothing fetched): each session as a
    timeline, blocked calls highlighted with their reason, then the summary."""
    s = Summary()
    out.write("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
              f"<title>guard replay: {agent} agent</title><style>{_CSS}</style></head><body>\n"
              f"<h1>guard replay: what the {_esc(agent)} agent would have done</h1>\n"
              f"<p class=\"meta\">policy: {_esc(policy)}</p>\n")
    current: tuple[str, str | None] | None = None
    for r in results:
        s.add(r)
        key = (r.call.file, r.call.session)
        if key != current:
            if current is not None:
                out.write("</table>\n")
            current = key
            out.write(f"<h2>{_esc(r.call.host)} session {_esc(r.call.session or '?')}</h2>\n"
                      f"<p class=\"meta\">{_esc(r.call.file)} · cwd {_esc(r.call.cwd)}</p>\n"
                      "<table><tr><th>#</th><th>time</th><th>tool</th><th>input</th>"
                      "<th>decision</th></tr>\n")
        c = r.call
        reason = ""
        if r.blocked:
            reason = (f"<div class=\"reason\">{_esc(r.reason)}</div>"
                      f"<div class=\"meta\">rule: {_esc(r.rule)}</div>")
        if r.resolved:
            reason += f"<div class=\"meta\">{_esc(r.resolved)}</div>"
        side = " <span class=\"side\">sub-agent</span>" if c.sidechain else ""
        out.write(f"<tr class=\"{_esc(r.decision)}\"><td>{r.index}</td>"
                  f"<td class=\"meta\">{_esc((c.time or '')[11:19])}</td>"
                  f"<td>{_esc(c.tool)}{side}</td><td><code>{_esc(short(c.input, 100))}</code>"
                  f"{reason}</td><td><span class=\"badge\">{_esc(r.decision.upper())}</span>"
                  "</td></tr>\n")
    if current is not None:
        out.write("</table>\n")
    out.write(f"<h2>Summary</h2>\n<table class=\"summary\"><tr><td>calls</td><td>{s.calls}</td>"
              f"</tr><tr><td>sessions</td><td>{len(s.sessions)}</td></tr><tr><td>allowed</td>"
              f"<td>{s.allowed}</td></tr><tr><td>asked</td><td>{s.asked}</td></tr><tr><td>"
              f"denied</td><td>{s.denied}</td></tr></table>\n")
    if s.by_rule:
        out.write("<h2>Blocked calls by rule</h2>\n<table>"
                  + "".join(f"<tr><td>{n}</td><td><code>{_esc(rule)}</code></td></tr>"
                            for rule, n in s.by_rule.most_common())
                  + "</table>\n")
    out.write("</body></html>\n")
    return s
