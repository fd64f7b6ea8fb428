"""``guard doctor``: which hosts are wired here, and which guard layers are active."""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from guard import hosts, probe
from guard.analysis import GUESSED, effects_for
from guard.audit import AuditError
from guard.audit.chain import key_path, load_key
from guard.audit.logfile import default_log_path, read
from guard.decide import Guard
from guard.hooks import HOSTS, missed
from guard.hooks.adapter import Scope
from guard.hooks.front_door import adapter_for
from guard.hooks.hookclient import ask_status, decision_env, run_dir, trusted
from guard.hooks.hookd import idle_seconds
from guard.hooks.settings_file import read_settings
from guard.match import engine_note
from guard.paths import Roots, find_worktree
from guard.planning.binding import worktrees_of
from guard.planning.current import describe_current_agent
from guard.planning.session import Mode, Session
from guard.sandbox.confine import FALLBACK, available, namespaces_unavailable, walls_off
from guard.setup import host_settings, host_state
from guard.setup.install import interpreter_of, project_dir, settings_file

#: ``skipped``: wired, but the host will not run the hook (trust missing, file
#: rewritten...): as bad as ``broken`` for the exit status.
Status = Literal["ok", "off", "broken", "skipped"]


@dataclass(slots=True)
class Check:
    name: str
    status: Status
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "detail": self.detail, **self.extra}


def check_command(command: str, fix: str = "guard install") -> tuple[Status, str]:
    """Does this hook command's interpreter exist, its hook client file too, and does the
    interpreter import guard's hook entry? ``fix`` is the command that rewires the host."""
    exe = interpreter_of(command)
    if exe is None:
        return "broken", "no absolute interpreter path in the command; reinstall with guard install"
    if not os.access(exe, os.X_OK):
        return "broken", (
            f"interpreter {exe} is missing: every call is blocked (exit 2) until you"
            " reinstall with guard install"
        )
    client = client_of(command)
    if client is not None and not os.path.isfile(client):
        return "broken", (
            f"stale hook command: it runs {client}, which does not exist (installed by an"
            " older guard, or from a checkout that moved): the host blocks every call"
            f" (exit 2) until you run `{fix}`"
        )
    try:
        proc = subprocess.run(
            [exe, "-I", "-c", "import guard.hooks.front_door"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "broken", f"{exe} cannot start: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return "broken", f"{exe} cannot import guard ({last}); every call is blocked"
    return "ok", f"runs {exe}"


def client_of(command: str) -> str | None:
    """The hook client file one of our hook commands runs (``python -I FILE HOST``), if any."""
    try:
        words = shlex.split(command.split("||", 1)[0])
    except ValueError:
        return None
    files = [w for w in words[1:3] if w.endswith(".py") and os.path.isabs(w)]
    return files[0] if files else None


ANALYSIS_ONLY = (
    "shell: guard's grammar or `guard confine` in plan mode (the hook cannot rewrite a"
    " command: a read-only sentence of guard's grammar runs directly, anything else is"
    " refused with its confined form)"
)


def shell_line(host: str, unavailable: str, no_namespaces: str = "") -> tuple[bool, str]:
    """(confined?, what happens to the host's plan-mode shell calls).

    Hosts whose hook can rewrite a call (Claude Code, Gemini CLI, OpenCode) run
    plan-mode shell commands under the kernel (``allow_confined``) when Landlock
    and guard's seccomp table are available, in namespaces where the kernel can
    make them (else the Landlock-only fallback, said here); hosts that can only
    deny (Codex, Cursor) run guard's grammar directly and hand the model the
    confined form ``guard confine -- …`` for anything else (guard.sandbox.direct).
    """
    if not adapter_for(host).can_rewrite:
        return False, ANALYSIS_ONLY
    if unavailable:
        return False, f"shell: analysis only: the kernel cannot confine here ({unavailable})"
    if no_namespaces:
        return True, ("shell: kernel-confined in plan mode, Landlock-only fallback (no"
                      f" namespaces here: {no_namespaces}; network, local IPC, other processes"
                      " and metadata are not walled off)")  # fmt: skip
    return True, ("shell: kernel-confined in plan mode (allow_confined: the hook rewrites each"
                  " command to run in namespaces under Landlock: a read-only view, loopback"
                  " only, no other process)")  # fmt: skip


_SCOPES: tuple[Scope, ...] = ("project", "user", "local")


def host_checks(cwd: str | os.PathLike[str] | None = None) -> list[Check]:
    project = project_dir(cwd)
    unavailable = available()
    checks: list[Check] = []
    for host in HOSTS:
        adapter = adapter_for(host)
        no_namespaces = namespaces_unavailable() if adapter.can_rewrite and not unavailable else ""
        confined, shell = shell_line(host, unavailable, no_namespaces)
        seen: set[Path] = set()
        for sc in _SCOPES:
            scope: str = sc
            path = settings_file(adapter, sc, cwd)
            if path in seen:  # a host whose local file is its project or user file
                continue
            seen.add(path)
            name = f"{host} ({scope})"
            extra: dict[str, Any] = {"host": host, "scope": scope, "path": str(path)}
            rewritten: str | None = None
            lax: list[str] = []
            try:
                own = host_settings.of(host)
                if not own.in_settings_file:
                    command, problem = own.installed_command(path)
                    if problem is not None and command is None:
                        raise ValueError(problem)
                    rewritten = problem
                    commands = [command] if command else []
                else:
                    settings = read_settings(path)
                    commands = sorted(set(adapter.find_entries(settings)))
                    rewritten = host_state.rewritten(host, path, settings)
                    lax = adapter.failing_open(settings)
            except Exception as exc:
                checks.append(Check(name, "broken", str(exc), extra))
                continue
            if not commands:
                if rewritten:
                    checks.append(Check(name, "skipped", rewritten, extra))
                else:
                    checks.append(Check(name, "off", f"not wired ({path})", extra))
                continue
            extra["commands"] = commands
            extra["shell"] = shell
            extra["shell_confined"] = confined
            fix = f"guard install {host} --{sc}"
            results = [check_command(c, fix) for c in commands]
            bad = [d for s, d in results if s != "ok"]
            if lax:
                bad.append(
                    f"guard's hook on {', '.join(dict.fromkeys(lax))} lacks \"onFailure\":"
                    f" \"block\": {adapter.title} runs the call when that hook times out or"
                    f" cannot start; run `{fix}`"
                )
            if bad:
                checks.append(Check(name, "broken", f"{path}: " + "; ".join(bad), extra))
                continue
            skips = host_state.skip_reasons(host, sc, path, project)
            if rewritten:
                skips.append(rewritten)
            if skips:
                extra["skip_reasons"] = skips
                checks.append(Check(name, "skipped", "; ".join(skips), extra))
            else:
                checks.append(
                    Check(name, "ok", f"wired in {path}; {results[0][1]}; {shell}", extra)
                )
    return checks


def guessed_tools(cwd: str | os.PathLike[str] | None = None, limit: int = 2000) -> Check:
    """Tool names guard did not know and had to analyse by their input (from the audit log)."""
    try:
        log = default_log_path(Roots.discover(os.fspath(cwd) if cwd is not None else
                                              os.getcwd()))
        records = list(read(log))[-limit:] if log.exists() else []
    except Exception as exc:
        return Check("guessed tool names", "off", f"audit log unreadable: {exc}")
    seen: dict[str, int] = {}
    for r in records:
        effects = r.get("effects")
        if isinstance(effects, list) and effects and isinstance(effects[0], dict) and \
                GUESSED in str(effects[0].get("detail", "")):
            key = f"{r.get('host', '?')}:{r.get('tool_name', '?')}"
            seen[key] = seen.get(key, 0) + 1
    if not seen:
        return Check("guessed tool names", "ok", "every tool name in the audit log is known")
    names = ", ".join(f"{k} ({n}x)" for k, n in sorted(seen.items()))
    return Check("guessed tool names", "off",
                 f"guard did not know these tools and analysed them by their input: {names};"
                 " a host may have renamed a tool (update guard)", {"guessed": seen})


def daemon_checks() -> list[Check]:
    """Every hook daemon running for this user and data directory, with the walls it gives
    the commands it confines (asked from the daemon itself: its own switches, not this
    shell's), and the deciding variables in which its environment differs from this one."""
    lifetime = (f"each exits after {idle_seconds():g} s without a call (the hosts'"
                " $GUARD_HOOKD_IDLE, default 600)")
    run = Path(run_dir())
    found: list[Check] = []
    mine = decision_env()
    for pidfile in sorted(run.glob("hookd-*.pid")) if run.is_dir() else []:
        sock = pidfile.with_suffix(".sock")
        try:
            pid = int(pidfile.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            continue  # a daemon that has gone: its files are swept by the next one
        name = f"hook daemon (pid {pid})"
        if not trusted(str(sock)):
            found.append(Check(name, "broken", f"{sock} is not a socket only you own; ignored"))
            continue
        status = ask_status(sock.name)
        if status is None:
            found.append(Check(name, "broken", f"{sock} does not say what it decides with"))
            continue
        theirs = status.get("env")
        theirs = theirs if isinstance(theirs, dict) else {}
        differ = sorted(k for k in {*theirs, *mine} if theirs.get(k) != mine.get(k))
        env_line = (f"started in another environment than this shell's ({', '.join(differ)}"
                    " differ): it answers only hosts whose environment is its own"
                    if differ else "started in this shell's environment")
        off = [str(status[k]) for k in ("walls", "namespaces") if status.get(k)]
        walls = "; ".join(off) if off else (
            "the commands it confines get namespaces and the process and IPC walls")
        broken = bool(status.get("switches")) or bool(status.get("walls"))
        found.append(Check(name, "broken" if broken else "ok",
                           f"answers hook calls on {sock}; {walls}; {env_line}; {lifetime}",
                           {"pid": pid, "socket": str(sock), "switches": status.get("switches"),
                            "env_differs": differ}))
    if not found:
        return [Check("hook daemon", "off",
                      f"not running: the next hook call starts it; {lifetime}")]
    return found


def layer_checks(cwd: str | os.PathLike[str] | None = None) -> list[Check]:
    checks: list[Check] = []
    try:
        g = Guard.load(cwd=os.fspath(cwd) if cwd is not None else None)
        checks.append(
            Check(
                "policy evaluator",
                "ok",
                f"{g.loaded.name} ({g.discovery}); agents: {', '.join(g.agent_names)};"
                f" {engine_note()}",
            )
        )
    except Exception as exc:
        checks.append(Check("policy evaluator", "broken", f"{type(exc).__name__}: {exc}"))
    checks.append(_tools_check())
    checks.append(agent_check(cwd))
    checks.append(orphans_check(cwd))
    checks.append(_audit_check(cwd))
    lay = probe.layers(cwd)  # the one description --version and review give too
    if lay.landlock_abi:
        checks.append(Check("kernel confinement", "ok",
                            f"{lay.landlock_line()}; guard run confines"))
    else:
        checks.append(Check("kernel confinement", "off", lay.landlock))
    checks.append(namespaces_check(lay))
    checks.extend(daemon_checks())
    checks.append(guessed_tools(cwd))
    checks.append(Check("monitor", "ok", lay.monitor))
    inst = probe.installation()
    checks.append(Check("installation", "ok", f"guard {inst.version} {inst.line()}; {inst.python}"))
    checks.append(held_check(cwd))
    return checks


def namespaces_check(lay: probe.Layers | None = None) -> Check:
    """Whether confined commands run in namespaces here, or fall back to Landlock alone."""
    off = walls_off()
    if off:
        return Check("namespaces", "broken", f"{off}; never for real use")

    why = (lay or probe.layers()).namespaces
    if why:
        return Check(
            "namespaces", "off",
            FALLBACK.format(why=why) + "; a policy that requires a wall"
            " ([agents.NAME.sandbox] require) refuses to run commands",
        )  # fmt: skip
    who = "mount, network, PID and IPC" if os.geteuid() == 0 else "user, mount, network, PID, IPC"
    return Check(
        "namespaces", "ok",
        f"{who} namespaces for each confined command: a read-only view but the writable roots,"
        " loopback only, its own /proc and IPC; leftover processes end with it",
    )  # fmt: skip


def agent_check(cwd: str | os.PathLike[str] | None = None) -> Check:
    """The agent the hooks use here right now, and why (planning's describe_current_agent)."""
    current = describe_current_agent(cwd if cwd is not None else os.getcwd())
    return Check("hooks' agent now", "ok" if current.agent else "broken", current.line())


def orphans_check(cwd: str | os.PathLike[str] | None = None) -> Check:
    """Open sessions whose owning process died, in every worktree around ``cwd``: an
    orphaned plan session keeps plan mode in force until the user acts."""
    here = os.fspath(cwd) if cwd is not None else os.getcwd()
    try:
        places = [Path(p) for p in worktrees_of([here])] or [Path(here)]
        found = [s for p in places for s in Session.list_all(p) if s.status == "orphaned"]
    except Exception as exc:
        return Check("orphaned sessions", "broken", f"cannot read the sessions here: {exc}")
    if not found:
        return Check("orphaned sessions", "ok", "none: every open session's owner runs")
    lines = []
    for s in found:
        owner = s.owner.describe() if s.owner else "its owner"
        if s.mode is Mode.PLAN:
            lines.append(
                f"session {s.id} in {s.project} (plan mode; {owner} is gone): plan mode stays"
                f" in force; `guard plan resume {s.id}` takes it over,"
                f" `guard plan exit --approve --session {s.id}` approves its plan,"
                f" `guard session end {s.id}` ends it"
            )
        else:
            lines.append(
                f"session {s.id} in {s.project} (build mode; {owner} is gone): decides"
                f" nothing; `guard session end {s.id}` tidies it up"
            )
    planning = any(s.mode is Mode.PLAN for s in found)
    return Check(
        "orphaned sessions", "broken" if planning else "off", "; ".join(lines),
        {"sessions": [s.id for s in found]},
    )  # fmt: skip


def _audit_check(cwd: str | os.PathLike[str] | None) -> Check:
    """Where hook decisions of this directory are appended (the path is shown), and the
    key that chains them (never made here: a key others can read is broken)."""
    try:
        path = default_log_path(Roots.discover(os.fspath(cwd) if cwd is not None else None))
    except Exception as exc:
        return Check("audit log", "broken", f"no audit log path here: {exc}")
    key = key_path()
    try:
        if key.exists() or key.is_symlink():
            load_key(key, create=False)
            chained = f", chained under {key} (`guard audit verify` checks it)"
        else:
            chained = f"; the key that chains it, {key}, is made with the first record"
    except AuditError as exc:
        return Check("audit log", "broken", f"{exc}: every hook call blocks",
                     {"path": str(path)})  # fmt: skip
    return Check(
        "audit log", "ok", f"every hook decision is appended to {path}{chained}",
        {"path": str(path)},
    )  # fmt: skip


def _tools_check() -> Check:
    """The tool-call analysis, tried on a shell command (it loads the bash parser)."""
    try:
        effects_for(hosts.DIALECTS[0], "Bash", {"command": "echo hi > x"}, "/")
    except Exception as exc:
        return Check("tool analysis", "broken", f"{type(exc).__name__}: {exc}: hooks block all")
    return Check("tool analysis", "ok", "guard.analysis analyses tool calls")


def project_of(cwd: str | None) -> Path:
    return project_dir(cwd)


def held_check(cwd: str | os.PathLike[str] | None = None) -> Check:
    """Host sessions of this worktree that guard holds after ``hook_missed`` (plan mode)."""
    here = os.path.realpath(cwd or os.getcwd())
    wt = find_worktree(here)
    mine = [d for _, d in missed.holds()
            if d.get("worktree") == (str(wt) if wt is not None else None)
            and (wt is not None or d.get("cwd") == here)]
    if not mine:
        return Check("held sessions", "ok", "no host session ran a tool without guard here")
    names = ", ".join(f"{d.get('host')} {d.get('session_id')}" for d in mine)
    return Check(
        "held sessions", "broken",
        f"{len(mine)} host session(s) ran a tool without guard's decision and are held in plan"
        f" mode ({names}): every call of theirs is refused; look at what landed, then run"
        " `guard session resume` (--restore undoes it)",
        {"held": [{"host": d.get("host"), "session_id": d.get("session_id"),
                   "since": d.get("since")} for d in mine]},
    )  # fmt: skip
