"""``guard review``: a security review of plan-mode isolation for one repository.

Two parts: which layers are active here (policy, tool-call analysis, Landlock,
monitor, host hooks), and the red-team matrix: every operation of
:mod:`guard.lint.corpus` decided for the plan agent. The operations are decided
against a scratch copy of the repository's layout (a fresh git repository with
the same policy, made outside guard's roots and removed afterwards), so symlink
attacks can be staged without touching the real worktree.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from guard import hosts, probe
from guard.analysis import DIALECTS, effects_of
from guard.decide import Guard
from guard.effects import Action, Decision, Effect, EffectKind, GuardError, ToolCall
from guard.gate import Gate
from guard.hooks.adapter import OUR_COMMAND
from guard.lint.corpus import CORPUS, Operation
from guard.plaintext import visible
from guard.replay.engine import replay, transcripts
from guard.replay.output import Summary
from guard.setup import host_settings
from guard.setup.doctor import host_checks, namespaces_check


@dataclass
class Layer:
    name: str
    active: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"layer": self.name, "active": self.active, "detail": self.detail}


@dataclass
class Row:
    op: Operation
    effects: list[Effect]
    source: str  # "analysed" | "declared" | "error"
    decision: Decision
    shown: str = ""  # the effects with {root}-relative paths

    @property
    def through(self) -> bool:
        """A write (or mode violation) the plan agent completes on its own."""
        return self.op.writes and self.decision.action is Action.ALLOW

    @property
    def asks(self) -> bool:
        # guard's egress proxy has no one to ask: it refuses what the policy asks about
        return self.op.writes and self.decision.action is Action.ASK and \
            self.op.dialect != "egress"

    @property
    def control_broken(self) -> bool:
        return self.op.category == "control" and self.decision.action is not Action.ALLOW

    def verdict(self) -> str:
        if self.through:
            return "GETS THROUGH"
        if self.asks:
            return "asks the user"
        if self.control_broken:
            return "plan file blocked"
        if self.op.category == "control":
            return "ok"
        if self.decision.action is Action.ALLOW:
            return "allowed: changes only the plan directory"
        if self.decision.action is Action.ASK:
            return "blocked (the egress proxy cannot ask)"
        return "blocked"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.op.id,
            "category": self.op.category,
            "dialect": self.op.dialect,
            "tool": self.op.tool,
            "effects": [e.to_json() for e in self.effects],
            "effects_shown": self.shown,
            "effects_source": self.source,
            "decision": self.decision.action.value,
            "reason": self.decision.reason,
            "rule": self.decision.rule,
            "verdict": self.verdict(),
            "note": self.op.note,
        }


@dataclass
class Review:
    policy: str
    discovery: str
    agent: str
    worktree: str
    layers: list[Layer]
    rows: list[Row] = field(default_factory=list)
    #: ``guard review --transcripts``: the replay summary of past sessions (see guard replay).
    replayed: dict[str, Any] | None = None

    @property
    def through(self) -> list[Row]:
        return [r for r in self.rows if r.through]

    @property
    def missing(self) -> list[Layer]:
        return [layer for layer in self.layers if not layer.active]

    def failed(self) -> bool:
        return bool(self.through)

    def verdict(self) -> str:
        if self.through:
            return (
                f"FAIL: {len(self.through)} operation(s) a plan agent could complete:"
                f" {', '.join(r.op.id for r in self.through)}"
            )
        return "PASS: no operation in the corpus lets the plan agent change anything"

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "discovery": self.discovery,
            "agent": self.agent,
            "worktree": self.worktree,
            "layers": [layer.to_json() for layer in self.layers],
            "missing_layers": [layer.name for layer in self.missing],
            "operations": [r.to_json() for r in self.rows],
            "through": [r.op.id for r in self.through],
            "verdict": self.verdict(),
            "failed": self.failed(),
            **({"transcripts": self.replayed} if self.replayed is not None else {}),
        }


# -- layers ------------------------------------------------------------------


def _hook_files(worktree: Path | None, home: Path) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    bases = [p for p in (worktree, home) if p is not None]
    for base in bases:
        out += [(h.title, base / name) for h in hosts.HOSTS for name in h.hook_files]
    return out




_GUARD_CMD = re.compile(r"(?:^|[\s/\"'])guard(?:\s|$)|-m\s+guard\b")


def _calls_guard(command: str) -> bool:
    """A hook command written by `guard install`, or a hand-written `guard hook ...`."""
    return bool(OUR_COMMAND.search(command) or _GUARD_CMD.search(command))


def _hook_commands(data: Any, events: list[str] | None = None, event: str = "") -> list[str]:
    """``event: command`` for every hook command under a ``hooks`` object."""
    found: list[str] = []
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "command" and isinstance(value, str):
                found.append(f"{event}: {value}" if event else value)
            else:
                found += _hook_commands(value, events, event or (key if key != "hooks" else ""))
    elif isinstance(data, list):
        for item in data:
            found += _hook_commands(item, events, event)
    return found


def host_hooks(worktree: Path | None, home: Path) -> list[Layer]:
    """One layer per host configuration file that exists: which of its hooks call guard?"""
    layers: list[Layer] = []
    for host, path in _hook_files(worktree, home):
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
            data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            layers.append(Layer(f"{host} hooks", False, f"{path}: unreadable ({exc})"))
            continue
        hooks = data.get("hooks") if isinstance(data, dict) else None
        commands = _hook_commands(hooks) if hooks is not None else []
        ours = [c for c in commands if _calls_guard(c.split(": ", 1)[-1])]
        if ours:
            detail = f"{path}: " + "; ".join(ours)
        elif commands:
            detail = f"{path}: {len(commands)} hook(s), none calls guard"
        else:
            detail = f"{path}: no hooks"
        layers.append(Layer(f"{host} hooks", bool(ours), detail))
    layers += _host_runtime(worktree)
    if not layers:
        layers.append(
            Layer("host hooks", False, "no host agent settings with hooks found (project or home)")
        )
    return layers


def _host_runtime(worktree: Path | None) -> list[Layer]:
    """guard doctor's view: OpenCode plugins, and hooks a host would skip (trust, rewrites)."""

    layers: list[Layer] = []
    for check in host_checks(worktree):
        known = hosts.get(str(check.extra.get("host")))
        if known is not None and not host_settings.of(known.name).in_settings_file and \
                check.status != "off":
            layers.append(Layer(f"{known.title} plugin ({check.extra.get('scope')})",
                                check.status == "ok", check.detail))
        elif check.status == "skipped":
            layers.append(Layer(f"{check.name} hook runs", False, check.detail))
        if "shell" in check.extra:  # a wired host: is its plan-mode shell confined?
            layers.append(Layer(f"{check.name} shell confinement",
                                bool(check.extra.get("shell_confined")), check.extra["shell"]))
    return layers


def detect_layers(g: Guard, worktree: Path | None) -> list[Layer]:
    layers = [
        Layer("policy evaluator", True, f"{g.loaded.name} ({g.discovery})"),
    ]
    layers.append(Layer("tool-call analysis", True, f"guard.analysis: {', '.join(DIALECTS)}"))

    lay = probe.layers(worktree)  # the one description --version and doctor give too
    if lay.landlock_abi == 0:
        layers.append(Layer("Landlock", False, f"no Landlock here: {lay.landlock}"))
    else:
        layers.append(Layer("Landlock", True, f"kernel ABI {lay.landlock_abi}; guard run"
                            " available"))
    spaces = namespaces_check(lay)
    layers.append(Layer("namespaces", spaces.status == "ok", spaces.detail))
    layers.append(Layer("monitor", True, f"guard.monitor, {lay.monitor}"))
    inst = probe.installation()
    layers.append(Layer("installation", True, f"guard {inst.version} {inst.line()}; {inst.python}"))
    layers.append(_egress_layer(g))
    layers += host_hooks(worktree, Path(os.path.expanduser("~")))
    return layers


def _egress_layer(g: Guard) -> Layer:
    """What guard's egress proxy lets a plan agent's confined commands reach."""
    name = g.plan_agent_name
    if name is None:
        return Layer("egress proxy rules", False, "no plan-mode agent")
    net = g.agent(name).network
    hosts = ", ".join(net.allow) or "none"
    return Layer(
        "egress proxy rules", True,
        f"agents.{name}: hosts allowed: {hosts}; model APIs under guard run:"
        f" {len(net.model_api)}; plain HTTP GET, HEAD and OPTIONS only, HTTPS by host;"
        " private, loopback and link-local answers only where a rule names the address",
    )


# -- the matrix -----------------------------------------------------------------


def _scratch_base(g: Guard) -> str:
    """A directory outside every root of ``g`` for the scratch worktree."""
    roots = [str(p) for p in (g.roots.worktree, g.roots.data, g.roots.home, g.roots.tmp) if p]
    for base in ("/var/tmp", tempfile.gettempdir(), os.getcwd()):
        real = os.path.realpath(base)
        if os.path.isdir(real) and os.access(real, os.W_OK) and not any(
            real == r or real.startswith(r.rstrip("/") + "/") for r in roots
        ):
            return real
    return os.path.realpath(tempfile.gettempdir())


def _subst(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        for key, repl in names.items():
            value = value.replace("{" + key + "}", repl)
        return value
    if isinstance(value, list):
        return [_subst(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, names) for k, v in value.items()}
    return value


def run_review(
    policy: str | None = None,
    agent: str | None = None,
    cwd: str | None = None,
    progress: Callable[[str], None] | None = None,
    transcripts: list[str] | None = None,
) -> Review:
    """Review plan-mode isolation for the repository around ``cwd``.

    ``transcripts``: past sessions' transcripts to replay for the plan agent (the
    section "in these N sessions the plan agent would have blocked M calls").
    """
    here = Guard.load(policy, cwd=cwd)
    name = agent or here.plan_agent_name
    if name is None:
        raise GuardError(f"policy {here.loaded.name} has no plan-mode agent to review")
    if here.agent(name).mode != "plan":
        raise GuardError(f"agent {name!r} is in {here.agent(name).mode} mode; review a plan agent")
    spec = policy if policy is not None else here.loaded.name
    layers = detect_layers(here, here.roots.worktree)
    review = Review(
        here.loaded.name,
        here.discovery,
        name,
        str(here.roots.worktree) if here.roots.worktree else "(none: not under version control)",
        layers,
    )
    if transcripts:
        review.replayed = replayed(transcripts, name, policy, cwd)
    scratch = tempfile.mkdtemp(prefix="guard-review-", dir=_scratch_base(here))
    try:
        wt = Path(scratch) / "repo"
        (wt / "src").mkdir(parents=True)
        (wt / "src/main.py").write_text("print('hi')\n")
        (wt / "README.md").write_text("# readme\n")
        (wt / ".openoxide/plans").mkdir(parents=True)
        (wt / ".git/hooks").mkdir(parents=True)
        if shutil.which("git"):
            subprocess.run(["git", "init", "-q", str(wt)], check=False, capture_output=True)
        g = Guard.load(spec, worktree=wt, cwd=wt)
        names = {
            "wt": str(g.roots.worktree),
            "plans": str(g.roots.plans),
            "home": str(g.roots.home),
        }
        # the gate as the hook has it, without sessions (the scratch copy has none) and
        # without a record: the matrix shows the policy's decision for the plan agent
        gate = Gate(guard=g, agent=name, env={}, sessions=False, refusal=_no_refusal)
        for op in CORPUS:
            if progress is not None:
                progress(op.id)
            for link, target in op.fixture:
                link_path = Path(_subst(link, names))
                link_path.parent.mkdir(parents=True, exist_ok=True)
                if not link_path.is_symlink():
                    link_path.symlink_to(_subst(target, names))
            for new, existing in op.hardlinks:
                new_path = Path(_subst(new, names))
                if not new_path.exists():
                    os.link(_subst(existing, names), new_path)
            review.rows.append(_decide(gate, g, op, names, str(wt)))
            for new, _ in op.hardlinks:  # a second name changes how its file is decided
                Path(_subst(new, names)).unlink(missing_ok=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return review


def _no_refusal(call: ToolCall) -> str:
    return ""


def _decide(gate: Gate, g: Guard, op: Operation, names: dict[str, str], cwd: str) -> Row:
    call = ToolCall(op.dialect, op.tool, _subst(op.input, names), cwd)
    try:
        effects = effects_of(call)
        source = "analysed"
    except Exception as exc:  # the adapter refused the call: hooks deny it
        d = Decision(Action.DENY, f"tool-call analysis refused the call: {exc}", "guard.analysis")
        return Row(op, [], "error", d)
    shown = "; ".join(_show(g, e, cwd) for e in effects)
    verdict = gate.decide(call, effects=effects)
    decision = verdict.decision  # the policy's, before any plan-mode wording
    if decision is None:  # the gate failed closed
        decision = Decision(Action.DENY, verdict.reason, verdict.rule)
    return Row(op, effects, source, decision, shown)


def _show(g: Guard, e: Effect, cwd: str) -> str:
    if e.target is None or e.kind in (EffectKind.TOOL, EffectKind.NETWORK):
        return str(e)
    path = os.path.normpath(os.path.join(cwd, os.path.expanduser(e.target)))
    return f"{e.kind.value} {g.roots.describe(path)}"


# -- output ------------------------------------------------------------------------


def replayed(paths: list[str], agent: str, policy: str | None,
             cwd: str | None = None) -> dict[str, Any]:
    """The summary of replaying ``paths`` for ``agent``, as ``guard replay --cwd CWD`` gives
    it (no audit log): ``cwd`` the checkout the calls are moved to (None: each call's own)."""

    s = Summary()
    for r in replay(transcripts(paths), agent=agent, policy=policy,
                    cwd=os.path.realpath(cwd) if cwd is not None else None):
        s.add(r)
    return {**s.to_json(), "blocked": s.blocked, "agent": agent,
            "top_rules": [{"rule": k, "calls": n} for k, n in s.by_rule.most_common(5)]}


def _replay_lines(r: dict[str, Any]) -> list[str]:
    lines = ["", "## Past sessions", "",
             f"In these {r['sessions']} sessions the {r['agent']} agent would have blocked"
             f" {r['blocked']} calls (of {r['calls']}: {r['denied']} denied, {r['asked']} asked)."]
    if r.get("missing_cwds"):
        lines += ["", f"Their folders do not exist here ({', '.join(r['missing_cwds'])}): each"
                  " call was re-rooted through its nearest existing folder; pass `--cwd` with"
                  " a checkout of the project to replay them there."]
    if r["top_rules"]:
        lines += ["", "| calls | rule |", "|---|---|"]
        lines += [f"| {t['calls']} | {_cell(t['rule'])} |" for t in r["top_rules"]]
    return [*lines, "", "Each call: `guard replay TRANSCRIPT...`."]


def to_markdown(review: Review) -> str:
    lines = [
        "# guard review: plan-mode isolation",
        "",
        f"- policy: `{review.policy}` ({review.discovery})",
        f"- plan agent: `{review.agent}`",
        f"- worktree: `{review.worktree}`",
        f"- **{review.verdict()}**",
        "",
        "## Layers",
        "",
        "| layer | active | detail |",
        "|---|---|---|",
    ]
    for layer in review.layers:
        mark = "yes" if layer.active else "**MISSING**"
        lines.append(f"| {layer.name} | {mark} | {_cell(layer.detail)} |")
    lines += [
        "",
        "## Attempted operations",
        "",
        "| id | category | dialect | tool | effects | decision | verdict | rule |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in review.rows:
        effects = r.shown or "(none)"
        verdict = f"**{r.verdict()}**" if r.through or r.control_broken else r.verdict()
        lines.append(
            f"| {r.op.id} | {r.op.category} | {r.op.dialect} | {r.op.tool} |"
            f" {_cell(effects)} | {r.decision.action} | {verdict} | {_cell(r.decision.rule)} |"
        )
    lines += [
        "",
        f"{len(review.rows)} operations, {len(review.through)} get through,"
        f" {sum(1 for r in review.rows if r.asks)} ask the user.",
    ]
    if review.replayed is not None:
        lines += _replay_lines(review.replayed)
    return visible("\n".join([*lines, ""]))  # transcripts and paths are shown, never acted on


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_json(review: Review) -> str:
    return json.dumps(review.to_json(), indent=2) + "\n"
