"""What the cockpit shows, read from guard's own files, and the user's actions on it.

Nothing here imports Textual: :class:`Cockpit` turns a worktree's session files,
the session's event log, the project's audit log and the plan file into a
:class:`View`, and :meth:`Cockpit.refresh` reads only what changed since the last
call (a ``stat`` per file when nothing did). The actions call the same library
functions as the CLI (:mod:`guard.planning.answer`, :class:`Session`), so the
cockpit and the CLI can be used side by side on the same state.

Memory is bounded: the activity lane keeps the last :data:`MAX_ACTIVITY` entries
and a streamed plan its last :data:`MAX_STREAM` characters, whatever the length
of the logs.
"""

from __future__ import annotations

# Lazy imports: the doctor's host checks only when the cockpit shows hosts (CLI start-up).
import hashlib
import json
import os
import stat
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from guard.audit.logfile import default_log_path
from guard.effects import GuardError
from guard.paths import Roots
from guard.planning import event_bus as ev
from guard.planning._vocabulary import Mode
from guard.planning.answer import Choice, answer_exit, answer_questions
from guard.planning.artifact import plan_text
from guard.planning.checklist import PlanItem
from guard.planning.current import describe_current_agent
from guard.planning.deciding import deciding_session
from guard.planning.session import Session, sessions_dir
from guard.ui.activity import Activity, from_audit, from_event

#: Event types the cockpit reads (the others are skipped before validation).
SHOWN_EVENTS = frozenset(
    {"plan_update", "plan_delta", "plan_completed", "decision", "violation", "mode_changed",
     "plan_exit"}
)  # fmt: skip
#: How the events that only add a line to the activity lane are written (pydantic's JSON).
ACTIVITY_TAGS = (b'"type":"decision"', b'"type":"violation"', b'"type":"mode_changed"',
                 b'"type":"plan_exit"')  # fmt: skip
#: Entries the activity lane keeps (the oldest go first).
MAX_ACTIVITY = 1000
#: Characters of a streamed ``<proposed_plan>`` the plan lane keeps.
MAX_STREAM = 256 * 1024
#: Calls of :meth:`Cockpit.refresh` between two listings of the sessions directory.
DIR_EVERY = 10
#: Bytes of a log read at a time.
CHUNK = 1 << 20
#: Bytes of a plan file the cockpit holds to show; a larger plan is shown up to here, and
#: approving it from the cockpit needs the whole file in $PAGER first.
MAX_PLAN_BYTES = 16 << 20


@dataclass(frozen=True, slots=True)
class Pending:
    """Something waiting for the user: a plan exit, plan-mode entry, or questions."""

    kind: str  # plan_exit | plan_enter | request_user_input
    at: str
    text: str
    questions: tuple[str, ...] = ()
    #: per question, the model's options (label, description), numbered from 1 on screen
    options: tuple[tuple[tuple[str, str], ...], ...] = ()


@dataclass(frozen=True, slots=True)
class HostLine:
    host: str
    status: str  # doctor's words: ok | off | broken | skipped
    confined: bool | None = None


@dataclass
class View:
    """Everything on screen, as plain data."""

    worktree: str
    session_id: str | None = None
    session_status: str = ""
    title: str | None = None
    mode: str | None = None
    agent: str | None = None
    agent_why: str = ""
    hosts: list[HostLine] | None = None  # None: not known yet
    checklist: list[PlanItem] = field(default_factory=list)
    explanation: str | None = None
    checklist_from: str = ""
    plan_path: str | None = None
    plan_text: str | None = None
    #: SHA-256 of the plan file's bytes (what an approval binds to), its lines, whether
    #: plan_text holds all of it
    plan_digest: str | None = None
    plan_lines: int = 0
    plan_whole: bool = True
    plan_streaming: bool = False
    plan_approved: bool = False  # the session's plan was approved (it left plan mode so)
    activity: deque[Activity] = field(default_factory=lambda: deque(maxlen=MAX_ACTIVITY))
    pending: list[Pending] = field(default_factory=list)
    #: id, mode, state, title of each session of the worktree, newest first
    sessions: list[tuple[str, str, str, str]] = field(default_factory=list)
    problem: str | None = None  # a file guard could not read: shown, never a crash
    #: activity lines added since the lane was last emptied, and how often it was emptied
    appended: int = 0
    generation: int = 0

    def add(self, line: Activity) -> None:
        self.activity.append(line)
        self.appended += 1

    def clear_activity(self) -> None:
        self.activity.clear()
        self.appended = 0
        self.generation += 1

    @property
    def shell(self) -> str:
        """Whether the wired hosts' plan-mode shell commands run confined."""
        if self.hosts is None:
            return "checking hosts..."
        wired = [h for h in self.hosts if h.status != "off"]
        if not wired:
            return ""
        confined = sorted(h.host for h in wired if h.confined)
        analysed = sorted(h.host for h in wired if not h.confined)
        parts = []
        if confined:
            parts.append("confined: " + ", ".join(confined))
        if analysed:
            parts.append("analysis only: " + ", ".join(analysed))
        return "shell " + "; ".join(parts)


class Source(Protocol):
    """What the app needs: the view, a refresh, and the user's actions."""

    view: View

    def refresh(self) -> bool: ...
    def watched(self) -> set[str]: ...
    def hosts(self) -> list[HostLine]: ...
    def answer_exit(self, choice: Choice, text: str = "", digest: str | None = None) -> str: ...
    def answer_questions(self, answers: list[str]) -> str: ...
    def accept_plan_mode(self) -> str: ...
    def start_plan(self, title: str) -> str: ...
    def end_session(self) -> str: ...
    def switch(self, session_id: str | None) -> str: ...


class Tail:
    """New complete lines of a growing file; starts over when it was replaced or truncated."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._key: tuple[int, int] | None = None
        self._offset = 0
        self._stamp: tuple[int, int] | None = None
        self._rest = b""

    def changed(self) -> bool:
        if self.path is None:
            return False
        try:
            st = os.stat(self.path)
        except OSError:
            return self._stamp is not None
        return (st.st_size, st.st_mtime_ns) != self._stamp

    def lines(self) -> Iterator[bytes]:
        """New complete lines, read a chunk at a time (memory stays bounded); b"" first when
        the file was replaced or truncated (the caller starts over)."""
        if self.path is None:
            return
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed below, after the last chunk
        except OSError:
            self._stamp = None
            return
        with handle:
            st = os.fstat(handle.fileno())
            key = (st.st_dev, st.st_ino)
            if key != self._key or st.st_size < self._offset:
                self._key, self._offset, self._rest = key, 0, b""
                yield b""  # a marker: start over
            handle.seek(self._offset)
            self._stamp = (st.st_size, st.st_mtime_ns)
            while chunk := handle.read(CHUNK):
                self._offset += len(chunk)
                data = self._rest + chunk
                cut = data.rfind(b"\n") + 1
                self._rest = data[cut:]
                for raw in data[:cut].split(b"\n"):
                    if raw.strip():
                        yield raw


def _option(option: dict[str, Any]) -> tuple[str, str]:
    """One of the model's options: its label (the answer) and description."""
    return str(option.get("label", "?")), str(option.get("description") or "")


def _hour_ago() -> str:
    return (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S")


def _read_bounded(path: str) -> tuple[str, bytes | None, int, bool]:
    """The plan file's digest (over all its bytes), its first :data:`MAX_PLAN_BYTES`, its
    lines and whether those are all of it. ``("missing"|"unreadable: …", None, 0, True)``
    when there is no file to show. Never follows a link, never blocks on a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return "missing", None, 0, True
    except OSError as exc:
        return f"unreadable: {exc.strerror}", None, 0, True
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file", None, 0, True
        digest = hashlib.sha256()
        head = bytearray()
        lines, last = 0, b""
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            lines += chunk.count(b"\n")
            last = chunk[-1:]
            if len(head) < MAX_PLAN_BYTES:
                head += chunk[: MAX_PLAN_BYTES - len(head)]
        total = lines + (1 if last and last != b"\n" else 0)
        return digest.hexdigest(), bytes(head), total, len(head) == os.fstat(fd).st_size


def _hosts(cwd: str) -> list[HostLine]:
    """Each host's wiring here in ``guard doctor``'s words (best scope first)."""
    from guard.setup.doctor import host_checks

    order = {"ok": 0, "skipped": 1, "broken": 2, "off": 3}
    best: dict[str, HostLine] = {}
    for check in host_checks(cwd):
        host = str(check.extra.get("host", check.name))
        line = HostLine(host, check.status, check.extra.get("shell_confined"))
        if host not in best or order[line.status] < order[best[host].status]:
            best[host] = line
    return list(best.values())


class Cockpit:
    """The cockpit's state for one worktree: the deciding session, or one the user chose."""

    def __init__(
        self,
        cwd: str | os.PathLike[str],
        session_id: str | None = None,
        *,
        env: dict[str, str] | None = None,
        max_activity: int = MAX_ACTIVITY,
        hosts: Callable[[str], list[HostLine]] = _hosts,
    ) -> None:
        self.cwd = os.path.realpath(cwd)
        if not os.path.isdir(self.cwd):
            raise GuardError(f"{cwd}: not a directory")
        if session_id is not None:
            Session.load(session_id, self.cwd)  # an unknown id is an error before any screen
        self.env = env
        self._chosen = session_id
        self._hosts = hosts
        self._max = max_activity
        self._dir = sessions_dir(self.cwd)
        self._dir_stamp: tuple[int, ...] | None = None
        self.session: Session | None = None
        self._events = Tail(None)
        self._audit = Tail(self._audit_path())
        self._plan_stamp: str | None = None  # the digest of the plan read last
        self._plan_read: tuple[str, bytes | None, int, bool] | None = None
        self._since = ""
        self._stream: list[str] = []
        self._streamed = 0
        self._ticks = 0
        self._own_stamp: int | None = None
        self.view = View(worktree=self.cwd, activity=deque(maxlen=max_activity))
        self.refresh(force=True)

    # ---- reading -----------------------------------------------------------------------------

    def _audit_path(self) -> Path | None:
        try:
            return default_log_path(Roots.discover(self.cwd))
        except Exception:
            return None

    def _own_changed(self) -> bool:
        assert self.session is not None
        try:
            stamp = os.stat(self.session.path).st_mtime_ns
        except OSError:
            stamp = -1
        if stamp == self._own_stamp:
            return False
        self._own_stamp = stamp
        return True

    def _dir_changed(self) -> bool:
        try:
            names = sorted(p for p in os.listdir(self._dir) if p.endswith((".json", ".pin")))
            stamp = tuple(
                s for n in names for s in (hash(n), os.stat(self._dir / n).st_mtime_ns)
            )
        except OSError:
            stamp = ()
        if stamp == self._dir_stamp:
            return False
        self._dir_stamp = stamp
        return True

    def refresh(self, *, force: bool = False) -> bool:
        """Read what changed; True when the view changed.

        The session's files are looked at each call; the list of sessions (a directory
        listing) every :data:`DIR_EVERY` calls, or when the session's own file changed.
        """
        changed = False
        self._ticks += 1
        try:
            own = self.session is not None and self._own_changed()
            look = force or own or self._ticks % DIR_EVERY == 0
            if look and (self._dir_changed() or force):
                self._reload_session()
                changed = True
            if self.session is not None and (force or self._events.changed()):
                self._read_events()
                changed = True
            if self._audit.changed():
                self._read_audit()
                changed = True
            if self._plan_changed():
                self._read_plan()
                changed = True
            if changed:
                self.view.problem = None
        except (GuardError, OSError, ValueError) as exc:
            self.view.problem = str(exc)
            changed = True
        return changed

    def _reload_session(self) -> None:
        v = self.view
        sessions = sorted(
            Session.list_all(self.cwd), key=lambda s: (s.created_at, s.active_ns), reverse=True
        )
        v.sessions = [(s.id, s.mode.value, s.status, s.title or "") for s in sessions]
        chosen: Session | None = None
        if self._chosen is not None:
            chosen = next((s for s in sessions if s.id == self._chosen), None)
            if chosen is None:
                raise GuardError(f"session {self._chosen} not found in {self._dir}")
        else:
            found = deciding_session(self.cwd)
            chosen = found[0] if found else None
        if chosen is None or self.session is None or chosen.id != self.session.id:
            self._events = Tail(chosen.events_path if chosen else None)
            self._audit = Tail(self._audit_path())
            v.clear_activity()
            self._stream = []
            v.plan_streaming = False
            v.checklist, v.explanation, v.checklist_from = [], None, ""
            # no session: the hooks may still be refusing calls in a host's own plan mode;
            # the last hour of the project's audit log shows them
            self._since = chosen.created_at if chosen else _hour_ago()
            self._plan_stamp = None
        self.session = chosen
        self._describe_agent()
        if chosen is None:
            v.session_id = v.mode = v.title = v.plan_path = v.plan_text = None
            v.session_status = ""
            v.pending = []
            return
        v.session_id, v.session_status, v.title = chosen.id, chosen.status, chosen.title
        v.mode = chosen.mode.value
        v.plan_approved = any(d.decision == "approve" for d in chosen.decisions)
        v.plan_path = chosen.plan_path
        if chosen.checklist and not v.checklist_from:
            v.checklist, v.explanation = list(chosen.checklist), chosen.explanation
            v.checklist_from = "update_plan"
        v.pending = [self._pending(p.kind, p.at, p.detail) for p in chosen.pending]

    @staticmethod
    def _pending(kind: str, at: str, detail: dict[str, Any]) -> Pending:
        if kind == "request_user_input":
            asked = [q for q in detail.get("questions", []) if isinstance(q, dict)]
            qs = tuple(str(q.get("question", "?")) for q in asked)
            options = tuple(
                tuple(_option(o) for o in q.get("options") or () if isinstance(o, dict))
                for q in asked
            )
            return Pending(kind, at, f"{len(qs)} question(s) from the model", qs, options)
        if kind == "plan_exit":
            via = detail.get("via") or "plan_exit"
            return Pending(kind, at, f"plan exit ({via})")
        return Pending(kind, at, "the model asks to enter plan mode")

    def _describe_agent(self) -> None:
        current = describe_current_agent(self.cwd, env=self.env)
        self.view.agent, self.view.agent_why = current.agent, current.reason

    def _read_events(self) -> None:
        """Read the new lines of the session's log. Lines that only add to the activity
        lane wait in a deque as long as the lane: of a long backlog, only the last
        :data:`MAX_ACTIVITY` are parsed."""
        v = self.view
        waiting: deque[bytes] = deque(maxlen=self._max)
        for raw in self._events.lines():
            if not raw:  # the log was replaced: read it again from the start
                v.clear_activity()
                self._stream = []
                waiting.clear()
                continue
            if any(tag in raw for tag in ACTIVITY_TAGS):
                waiting.append(raw)
                continue
            self._read_event(raw)
        for raw in waiting:
            self._read_event(raw)

    def _read_event(self, raw: bytes) -> None:
        v = self.view
        try:
            data = json.loads(raw)
            kind = data.get("type") if isinstance(data, dict) else None
            if kind not in SHOWN_EVENTS:
                return
            if kind == "plan_delta":  # its text, without validating each piece
                self._delta(str(data.get("delta", "")))
                return
            event = ev.parse_event(data)
        except ValueError:
            return  # one malformed line must not hide the others
        if isinstance(event, ev.PlanUpdate):
            v.checklist, v.explanation = list(event.plan), event.explanation
            v.checklist_from = event.source or "update_plan"
        elif isinstance(event, ev.PlanCompleted):
            self._stream = [event.text[-MAX_STREAM:]]
            v.plan_streaming = False
        line = from_event(event)
        if line is not None:
            v.add(line)

    def _delta(self, delta: str) -> None:
        if not self.view.plan_streaming:
            self._stream, self._streamed = [], 0
        self.view.plan_streaming = True
        self._stream.append(delta)
        self._streamed += len(delta)
        if self._streamed > 2 * MAX_STREAM:
            self._stream = ["".join(self._stream)[-MAX_STREAM:]]
            self._streamed = MAX_STREAM

    def _read_audit(self) -> None:
        v = self.view
        for raw in self._audit.lines():
            if not raw:  # rotated: the new file starts empty, the old one was read
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("source") == "mcp":
                continue  # the MCP proxy's decisions are in the session's own log
            line = from_audit(record)
            if line is not None and line.at >= self._since:
                v.add(line)

    def _plan_changed(self) -> bool:
        """Whether the plan file's content changed: read and hashed each time, since its size
        and times say nothing (the agent can keep the size and put the old mtime back)."""
        path = self.view.plan_path
        if not path:
            return self._plan_stamp is not None
        self._plan_read = _read_bounded(path)
        return self._plan_read[0] != self._plan_stamp

    def _read_plan(self) -> None:
        v = self.view
        if not v.plan_path:
            self._plan_stamp, v.plan_text, v.plan_digest = None, None, None
            return
        digest, head, lines, whole = self._plan_read or _read_bounded(v.plan_path)
        self._plan_read = None
        self._plan_stamp = digest
        v.plan_digest = digest if head is not None else None
        v.plan_lines, v.plan_whole = lines, whole
        v.plan_text = None if head is None else plan_text(head)

    def watched(self) -> set[str]:
        """The directories whose changes may change the view (for an inotify watch)."""
        dirs = {str(self._dir)}
        for path in (self._audit.path, self.view.plan_path):
            if path:
                dirs.add(os.path.dirname(path))
        return {d for d in dirs if os.path.isdir(d)}

    @property
    def streamed_plan(self) -> str:
        """The ``<proposed_plan>`` text streamed so far (or last completed)."""
        return "".join(self._stream)

    def hosts(self) -> list[HostLine]:
        """The wired hosts (slow: runs each hook interpreter; call it off the UI thread)."""
        return self._hosts(self.cwd)

    # ---- the user's actions: the CLI's library calls -------------------------------------------

    def _need_session(self) -> Session:
        if self.session is None:
            raise GuardError("no open session here: start plan mode with `p`")
        return self.session

    def answer_exit(self, choice: Choice, text: str = "", digest: str | None = None) -> str:
        """`guard plan exit --approve --digest SHA256 | --reject REASON | --refine NOTE`:
        an approval covers the plan with ``digest`` only (:class:`PlanChanged` otherwise)."""
        session = self._need_session()
        said = answer_exit(session, choice, text, digest=digest).said
        self.refresh(force=True)
        return f"{session.id}: {said}"

    def answer_questions(self, answers: list[str]) -> str:
        """`guard plan answer A1 A2 ...`."""
        session = self._need_session()
        answer_questions(session, answers)
        self.refresh(force=True)
        return f"{session.id}: answers recorded for the model"

    def accept_plan_mode(self) -> str:
        """`guard mode plan --session ID`: the user accepts the model's plan_enter."""
        session = self._need_session()
        session.refresh()
        if not any(p.kind == "plan_enter" for p in session.pending):
            raise GuardError(f"session {session.id} has not asked to enter plan mode")
        session.set_mode(Mode.PLAN, "set by the user in guard ui")
        session.deliver(f"The user accepted plan mode. Write your plan to {session.plan_path}.")
        self.refresh(force=True)
        return f"{session.id}: plan (plan file: {session.plan_path})"

    def start_plan(self, title: str) -> str:
        """`guard plan start TITLE`: a new session in plan mode, which decides here."""
        if not title.strip():
            raise GuardError("give the plan a title, e.g. 'Add caching'")
        session = Session.start(self.cwd, Mode.PLAN, title=title.strip())
        self._chosen = None
        self.refresh(force=True)
        return f"plan mode: session {session.id}, plan file {session.plan_path}"

    def end_session(self) -> str:
        """`guard session end`."""
        session = self._need_session()
        if not session.end("ended by the user in guard ui"):
            raise GuardError(f"session {session.id} has already ended ({session.end_reason})")
        self._chosen = None
        self.refresh(force=True)
        return f"{session.id}: ended; the hooks now use {self.view.agent or '(host decides)'}"

    def switch(self, session_id: str | None) -> str:
        """Show another session of the worktree (None: follow the deciding one)."""
        self._chosen = session_id
        self.refresh(force=True)
        return f"showing session {self.view.session_id or '(none)'}"
