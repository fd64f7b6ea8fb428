"""Tools that ran without guard's decision: ``hook_missed``.

A host that cannot start guard's pre-tool hook (a lowered process or file
limit, a full process table, a hook skipped for any other reason) treats that
as a non-blocking error and runs the tool. guard therefore also wires the
host's post-tool event (Claude Code and Codex ``PostToolUse``, Gemini CLI
``AfterTool``, OpenCode ``tool.execute.after``) and, for Claude Code, reads the
tool results the host added to its transcript since guard last looked. A
result of a tool that can change something (:data:`CHANGING`) with no matching
pre-tool decision record in the audit log is a ``hook_missed`` violation:

* paired with exactly one decision under which it could run (an allow, never a
  deny): by host, host session id and ``tool_use_id`` where the host gives one,
  else by tool name and a digest of the tool input (``input_sha256`` in the
  verdict record), each decision then claimed by one call, within the end of the
  project's log; only records whose chain MAC verifies count
  (:mod:`guard.hooks.decided`);
* recorded in the audit log (``"type": "violation", "kind": "hook_missed"``);
* told to the model and the user in the answer of that hook call;
* in plan mode, the host session is **held**: a file under
  ``<data>/missed/`` (which plan mode cannot write) makes every further call of
  that session a deny, until the user runs ``guard session resume``. The held
  answer says what landed since the session's start (:mod:`guard.hooks.reconcile`).

Everything here fails closed the way the hook does: an error while checking is
raised to the runner, which blocks the call.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guard import hosts, locking
from guard.audit.logfile import default_log_path, now_iso
from guard.fleet.records import stamp
from guard.fleet.syslog import ship
from guard.gate import Verdict, VerdictAction
from guard.hooks import reconcile
from guard.hooks.decided import KIND, Trust, decided
from guard.hooks.missed_store import file_key, missed_dir, write_json

if TYPE_CHECKING:
    from guard.decide import Guard
    from guard.gate import Gate, Verdict
    from guard.hooks.adapter import HookCall, HostAdapter

#: Per host: tools whose result means something may have changed (from the registry).
CHANGING: dict[str, frozenset[str]] = {
    h.name: h.changing_tools for h in hosts.HOSTS if h.changing_tools
}
RULE = "guard.hook_missed"
#: At most this many transcript bytes are read per hook call (the rest at the next).
TRANSCRIPT_STEP = 4 << 20
RESUME = "guard session resume"
#: Set to 1 (in the host's environment): in plan mode, undo what landed as soon as a
#: ``hook_missed`` is found, not only at ``guard session resume --restore``.
RESTORE_ENV = "GUARD_MISSED_RESTORE"


def changes(host: str, tool: str) -> bool:
    """Whether a result of ``tool`` on ``host`` may have changed something."""
    return tool in CHANGING.get(host, frozenset()) or tool.startswith("mcp__")


@dataclass(frozen=True, slots=True)
class Missed:
    """A tool result guard never decided."""

    host: str
    session: str | None
    tool_name: str
    tool_use_id: str | None
    cwd: str | None
    via: str  # the post-tool event, or "transcript"

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "session_id": self.session, "tool_name": self.tool_name,
                "tool_use_id": self.tool_use_id, "cwd": self.cwd, "via": self.via}

    def describe(self) -> str:
        use = f" {self.tool_use_id}" if self.tool_use_id else ""
        return f"{self.tool_name}{use}"


# -- the hold -------------------------------------------------------------------------


def hold_path(host: str, session: str | None, cwd: str | None) -> Path:
    return missed_dir() / f"held-{file_key(host, session, cwd)}.json"


def read_hold(path: Path) -> dict[str, Any] | None:
    """The hold at ``path``, None when there is none. An unreadable hold still holds."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    return data if isinstance(data, dict) else {"unreadable": str(path)}


def hold(found: list[Missed], worktree: str | None, agent: str, report: Mapping[str, Any],
         forged: list[dict[str, Any]] | None = None) -> Path:
    """Hold the host session of ``found`` (plan mode): every further call is a deny.
    ``forged``: decision records of those calls that did not verify (said in the hold)."""
    first = found[0]
    path = hold_path(first.host, first.session, first.cwd)
    old = read_hold(path) or {}
    calls = [*old.get("calls", []), *[m.to_json() for m in found]] if isinstance(
        old.get("calls"), list) else [m.to_json() for m in found]
    before = old.get("forged")
    kept = [*(before if isinstance(before, list) else []), *(forged or [])][-20:]
    write_json(path, {
        "host": first.host, "session_id": first.session, "worktree": worktree,
        "cwd": first.cwd, "agent": agent, "since": old.get("since") or now_iso(),
        "calls": calls[-50:], "landed": report, **({"forged": kept} if kept else {}),
    })
    return path


def holds() -> list[tuple[Path, dict[str, Any]]]:
    """Every hold, oldest first."""
    out: list[tuple[Path, dict[str, Any]]] = []
    directory = missed_dir()
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    for name in names:
        if name.startswith("held-") and name.endswith(".json"):
            data = read_hold(directory / name)
            if data is not None:
                out.append((directory / name, data))
    out.sort(key=lambda item: str(item[1].get("since", "")))
    return out


def held_reason(data: Mapping[str, Any], report_text: str = "") -> str:
    given = data.get("calls")
    calls: list[Any] = given if isinstance(given, list) else []
    names = ", ".join(
        str(c.get("tool_name")) + (f" {c.get('tool_use_id')}" if c.get("tool_use_id") else "")
        for c in calls[-5:] if isinstance(c, dict)
    ) or "a tool call"
    session = data.get("session_id") or "this session"
    text = (
        f"{data.get('host', 'the host')} ran {names} without guard's decision (its pre-tool"
        f" hook did not run); plan mode holds session {session}: every call is refused until"
        f" the user looks at what happened and runs `{RESUME}`"
    )
    forged = data.get("forged")
    if isinstance(forged, list) and forged and all(isinstance(f, dict) for f in forged):
        text += f". {tamper_text(forged)}"
    return text + (f". {report_text}" if report_text else "")


# -- the host's transcript (Host.reads_transcript) ------------------------------------------


def _seen_path(host: str, session: str | None, cwd: str | None) -> Path:
    return missed_dir() / f"seen-{file_key(host, session, cwd)}.json"


def transcript_results(
    host: str, session: str | None, cwd: str | None, transcript: str | None
) -> tuple[list[tuple[str, str, dict[str, Any]]], bool]:
    """The changing tools' successful results added to the transcript of a host that
    reads one (:attr:`guard.hosts.Host.reads_transcript`: Claude Code's JSONL) since
    the last look: (tool_use_id, tool name, input) each; and whether this is the first
    look at the session (then nothing before now is reported: guard was not there)."""
    known = hosts.get(host)
    if known is None or not known.reads_transcript or not transcript or \
            not os.path.isabs(transcript):
        return [], False
    seen = _seen_path(host, session, cwd)
    seen.parent.mkdir(parents=True, exist_ok=True, mode=0o700)

    # one reader at a time per session: parallel tool calls must not read a delta twice
    lock = os.open(seen.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        locking.flock(lock, f"the transcript cursor {seen}")
        return _transcript_delta(host, seen, transcript)
    finally:
        os.close(lock)


def _transcript_delta(
    host: str, seen: Path, transcript: str
) -> tuple[list[tuple[str, str, dict[str, Any]]], bool]:
    try:
        state = json.loads(seen.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        state = None
    try:
        fd = os.open(transcript, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return [], False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return [], False
        first = not isinstance(state, dict) or state.get("ino") != st.st_ino
        if first:
            write_json(seen, {"ino": st.st_ino, "offset": st.st_size, "uses": {}})
            return [], True
        assert isinstance(state, dict)
        offset = int(state.get("offset", 0))
        if offset >= st.st_size:
            return [], False
        os.lseek(fd, offset, os.SEEK_SET)
        data = os.read(fd, min(st.st_size - offset, TRANSCRIPT_STEP))
    finally:
        os.close(fd)
    end = data.rfind(b"\n") + 1  # whole lines only; a line still being written waits
    kept = state.get("uses")
    uses: dict[str, Any] = kept if isinstance(kept, dict) else {}
    done_before = state.get("done")
    done: list[str] = done_before if isinstance(done_before, list) else []
    results: list[tuple[str, str, dict[str, Any]]] = []
    for line in data[:end].splitlines():
        if b'"tool_use"' not in line and b'"tool_result"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg = rec.get("message") if isinstance(rec, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        for block in content if isinstance(content, list) else ():
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                name = block.get("name")
                if isinstance(name, str) and changes(host, name):
                    given = block.get("input")
                    uses[block["id"]] = [name, given if isinstance(given, dict) else {}]
            elif block.get("type") == "tool_result":
                use_id = str(block.get("tool_use_id"))
                use = uses.pop(use_id, None)
                if use is not None and not block.get("is_error") and use_id not in done:
                    done.append(use_id)  # a result the transcript repeats counts once
                    results.append((use_id, use[0], use[1]))
    if len(uses) > 200:  # results that never came (a killed run): keep the newest
        uses = dict(list(uses.items())[-200:])
    write_json(seen, {"ino": st.st_ino, "offset": offset + end, "uses": uses,
                       "done": done[-200:]})
    return results, False


def violation(m: Missed, agent: str | None, mode: str | None, held: bool,
              landed: Mapping[str, Any] | None) -> dict[str, Any]:
    """The audit record of one missed call."""
    out: dict[str, Any] = {
        "type": "violation", "source": "hook", "kind": KIND, "rule": RULE,
        **m.to_json(), "agent": agent, "mode": mode, "held": held,
        "reason": (f"{m.host} ran {m.describe()} without guard's pre-tool decision"
                   " (no matching decision record)"),
    }
    if landed:
        out["landed"] = dict(landed)
    return out


# -- the runner's two entry points --------------------------------------------------------


def _deciding(gate: Gate, hook: HookCall, adapter: HostAdapter) -> tuple[Guard, str, str, str]:
    """(policy, agent, why, its mode) for the call, found as the gate finds them: the
    deciding session's worktree (a nested repository's call may belong to the outer
    worktree's plan session) gives the policy, its roots, its audit log."""
    call = hook.call
    try:
        effects = gate.effects(call)
    except Exception:  # the call already ran (or is refused anyway): decide by its cwd
        effects = []
    chosen = gate.resolve(call, adapter.mode_hint(hook), effects)
    g, name = chosen.guard, chosen.agent
    return g, name, chosen.why, g.agent(name).mode


def _found(
    g: Guard, hook: HookCall, payload: Mapping[str, Any], *, post: bool
) -> tuple[list[Missed], list[dict[str, Any]]]:
    """The calls of this host session guard never decided, known at this hook call; and
    the records that claimed to decide them but whose MAC does not verify (forged)."""
    call = hook.call
    log = default_log_path(g.roots)
    transcript = payload.get("transcript_path")
    results, _ = transcript_results(hook.host, call.session, call.cwd,
                                    transcript if isinstance(transcript, str) else None)
    found: list[Missed] = []
    trust: Trust | None = None
    for use_id, name, given in results:
        if use_id == hook.tool_use_id:
            continue  # this call: decided now (pre-tool), or checked below (post-tool)
        trust = trust or Trust()
        if not decided(log, hook.host, call.session, use_id, name, given, trust):
            found.append(Missed(hook.host, call.session, name, use_id, call.cwd, "transcript"))
    if post and changes(hook.host, call.name):
        trust = trust or Trust()
        claims = missed_dir() / f"paired-{file_key(hook.host, call.session, call.cwd)}"
        if not decided(log, hook.host, call.session, hook.tool_use_id, call.name, call.input,
                       trust, claims):
            found.append(Missed(hook.host, call.session, call.name, hook.tool_use_id,
                                call.cwd, hook.event))
    if not found:  # all decided so far: the state to reconcile against, once per session
        reconcile.take_start(g.roots.worktree, hook.host, call.session, call.cwd)
    return found, (trust.forged if trust is not None else [])


TAMPER_KIND = "audit_tampered"
TAMPER_RULE = "guard.audit_tampered"


def tamper_text(forged: list[dict[str, Any]]) -> str:
    """What the model and the user are told about forged decision records."""
    first = forged[0]
    return (
        f"the audit log holds {len(forged)} record(s) claiming guard's decision for a call"
        f" that guard cannot verify ({first['problem']}; {first['log']}): the audit log was"
        " tampered with, and they do not count as decisions; run `guard audit verify`"
    )


def _record(gate: Gate, hook: HookCall, adapter: HostAdapter,
            found: list[Missed],
            forged: list[dict[str, Any]] | None = None) -> tuple[Guard, str, str, str]:
    """Audit each missed call, and a tampering violation for forged decision records;
    hold the session in plan mode. (policy, agent, why, message)."""
    g, agent, why, mode = _deciding(gate, hook, adapter)
    plan = mode == "plan"
    call = hook.call
    report = reconcile.landed(g.roots.worktree, hook.host,
                              call.session, call.cwd) if plan and found else {}
    if plan and gate.env.get(RESTORE_ENV, "").strip() == "1" and report.get("paths"):
        start = reconcile.start_of(hook.host, call.session, call.cwd)
        key = "missed-" + file_key(hook.host, call.session, call.cwd)[:12]
        report = {**report, "restored": reconcile.restore(report, start, key)}
    out = [violation(m, agent, mode, plan, report) for m in found]
    if forged:
        out.append({
            "type": "violation", "source": "hook", "kind": TAMPER_KIND, "rule": TAMPER_RULE,
            "host": hook.host, "session_id": call.session, "agent": agent, "mode": mode,
            "records": forged, "reason": tamper_text(forged),
        })
    for record in out:
        stamp(record, g, session=call.session, host_agent=hook.host)
        if gate.sink is not None:
            gate.sink.write(record, g.roots)
            if not getattr(gate.sink, "ships", False):
                ship(g.audit_settings, [record], g.roots.data)  # never raises, never waits
    tamper = f" Also: {tamper_text(forged)}." if forged else ""
    if not found:
        return g, agent, why, f"guard: {tamper_text(forged or [{}])}. Tell the user."
    names = ", ".join(m.describe() for m in found)
    if plan:
        wt = g.roots.worktree
        hold(found, str(wt) if wt is not None else None, agent, report, forged or [])
        return g, agent, why, ""
    return g, agent, why, (
        f"guard: {hook.host} ran {names} without guard's decision (its pre-tool hook did"
        " not run); this is recorded as hook_missed in the audit log." + tamper
        + " Tell the user."
    )


def report_missed(
    gate: Gate, adapter: HostAdapter, hook: HookCall, payload: Mapping[str, Any]
) -> str:
    """At a pre-tool call: record every tool that ran without guard's decision since the
    last look (``hook_missed``; in plan mode that holds the session). A notice to add to
    the answer when calls were missed outside plan mode, else ''."""
    call = hook.call
    transcript = payload.get("transcript_path")
    if read_hold(hold_path(hook.host, call.session, call.cwd)) is None and \
            not (isinstance(transcript, str) and transcript):
        return ""  # nothing to look at: no transcript, and no hold whose log to search
    # the cwd's policy tells where to look (its log; another project's recent log is
    # searched too); recording and refusing use the deciding session's, as the gate does
    found, forged = _found(gate.load(call), hook, payload, post=False)
    if not (found or forged):
        return ""
    _, _, _, notice = _record(gate, hook, adapter, found, forged)
    return notice


def held_refusal(
    gate: Gate, adapter: HostAdapter, hook: HookCall, context: Mapping[str, Any]
) -> Verdict | None:
    """At a pre-tool call: the audited deny of every call of a held session, else None."""
    call = hook.call
    data = read_hold(hold_path(hook.host, call.session, call.cwd))
    if data is None:
        return None
    g, agent, why, _ = _deciding(gate, hook, adapter)
    text = reconcile.describe(data.get("landed"))
    verdict = Verdict(VerdictAction.DENY, held_reason(data, text), RULE, call,
                      agent, why)
    return gate.record(verdict, context, guard=g)


def after_tool(gate: Gate, adapter: HostAdapter, hook: HookCall,
               payload: Mapping[str, Any]) -> str | None:
    """At a post-tool call: what the model and the user are told (None: nothing)."""
    call = hook.call
    path = hold_path(hook.host, call.session, call.cwd)
    found, forged = _found(gate.load(call), hook, payload, post=True)
    notice = ""
    if found or forged:
        _, _, _, notice = _record(gate, hook, adapter, found, forged)
    data = read_hold(path)
    if data is not None:
        return "guard: " + held_reason(data, reconcile.describe(data.get("landed")))
    return notice or None
