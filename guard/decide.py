"""The evaluator: may this agent do this effect to this path?

Compilation does the work (:mod:`guard.match`, :mod:`guard.agent_rules`);
:meth:`Guard._rule_walk` is the rule walk: protected > managed deny > deny >
managed ask > ask > allow > default, each list decided by the deepest level a
pattern of it matches. The memos around it (:mod:`guard.decisions`) key it on
the canonical input. Any exception while deciding is a deny whose reason is the
error: guard never fails open.
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from guard.agent_rules import LISTS, CompiledAgent, Hit, ListRuling
from guard.decisions import MEMO_LIMIT, error_decision, new_decision, with_effect, with_reason
from guard.effects import Action, Decision, Effect, EffectKind, GuardError, did_you_mean
from guard.hosts import HOSTS
from guard.match import CompiledList, Pattern, parse_pattern
from guard.network import format_target, split_target, target_path
from guard.paths import CanonicalPath, Roots, canonicalize, plan_file_problem
from guard.policy import BUILTIN_PREFIX, LoadedPolicy, load_policy
from guard.policy.loader import unchanged
from guard.policy.managed import ManagedLayer, load_managed
from guard.policy.managed import unchanged as managed_unchanged
from guard.policy.valid import Agent, Audit
from guard.sha import sha256

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (guard run's start)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["LISTS", "LIST_ACTION", "PROTECTED_PATTERNS", "Explanation", "Guard", "ListHit", "load"]

LIST_ACTION = {
    "deny": Action.DENY, "ask": Action.ASK, "allow": Action.ALLOW, "model_api": Action.ALLOW,
}  # fmt: skip
#: the rule of a plan-mode refusal of a network effect that may change the remote
PLAN_NETWORK_RULE = "guard.plan-network"

#: Denied for writes and deletes in every agent unless it sets ``protected = false``:
#: guard's own state, git's hooks and configuration, shell start-up files, and every
#: host's hook settings (from :data:`guard.hosts.HOSTS`: a new host brings its own).
PROTECTED_PATTERNS: tuple[str, ...] = (
    ".openoxide/*",
    "!.openoxide/plans",
    "/.git/hooks/",
    "/.git/config",
    *(pattern for host in HOSTS for pattern in host.protected if pattern.startswith("/")),
    "{data}/*",
    "!{data}/plans",
    "{home}/.bashrc",
    "{home}/.bash_profile",
    "{home}/.bash_login",
    "{home}/.bash_logout",
    "{home}/.profile",
    "{home}/.zshrc",
    "{home}/.zshenv",
    "{home}/.zprofile",
    "{home}/.zlogin",
    "{home}/.config/fish/",
    "{home}/.gitconfig",
    "{home}/.config/git/",
    "{home}/.ssh/",
    *(pattern for host in HOSTS for pattern in host.protected if not pattern.startswith("/")),
)
PROTECTED_SOURCE = "builtin:protected"


def _escape_glob(path: str) -> str:
    return "".join("\\" + c if c in "*?[\\!# " else c for c in path)


@dataclass(frozen=True, slots=True)
class ListHit:
    """One list consulted by :meth:`Guard.explain`."""

    list_name: str  # protected | deny | ask | allow
    matches: list[tuple[str, Pattern]]  # (level, pattern) pairs that matched
    decided_by: Pattern | None  # the pattern that decides this list (None: no match)


@dataclass(frozen=True, slots=True)
class Explanation:
    agent: str
    effect: Effect
    paths: list[str]
    lists: dict[str, list[ListHit]]  # per checked path
    decision: Decision


#: how many compiled Guards :meth:`Guard.load_shared` keeps (one per roots and policy)
SHARED_GUARDS = 8
_shared: dict[tuple[str, str, Roots], Guard] = {}
_shared_lock = threading.Lock()


def _policy_spec(policy: str | os.PathLike[str] | None, roots: Roots) -> tuple[str, str]:
    """Which policy to load and why: explicit > $GUARD_POLICY > the worktree's > builtin."""
    if policy is not None:
        return os.fspath(policy), "given explicitly"
    if os.environ.get("GUARD_POLICY"):
        return os.environ["GUARD_POLICY"], "from $GUARD_POLICY"
    if roots.worktree is not None and (roots.worktree / ".openoxide/policy.toml").is_file():
        found = str(roots.worktree / ".openoxide/policy.toml")
        return found, "the worktree's .openoxide/policy.toml"
    return BUILTIN_PREFIX + "default", "built-in default (no policy file found)"


class Guard:
    """A compiled policy bound to concrete roots. Load it with :meth:`load`."""

    def __init__(
        self,
        loaded: LoadedPolicy,
        roots: Roots,
        discovery: str = "",
        managed: ManagedLayer | None = None,
    ) -> None:
        self.managed = managed
        #: the policy's fleet fields, worked out once (guard.fleet.records.policy_fields)
        self.fleet_fields: dict[str, Any] | None = None
        if managed is not None:
            loaded = managed.pinned(loaded)
        self.loaded = loaded
        self.roots = roots
        self.discovery = discovery
        self.root_map: dict[str, str | None] = {
            "worktree": str(roots.worktree) if roots.worktree else None,
            "plans": str(roots.plans),
            "data": str(roots.data),
            "home": str(roots.home),
            "tmp": str(roots.tmp),
        }
        protected = [parse_pattern(p) for p in PROTECTED_PATTERNS]
        protected += [parse_pattern("/" + _escape_glob(str(p))) for p in loaded.paths]
        if managed is not None:  # root's files, but an agent may run as root
            protected += [parse_pattern("/" + _escape_glob(f)) for f in managed.files]
        self.protected_patterns = [p for p in protected if p is not None]
        self._agents: dict[str, CompiledAgent] = {}
        # Roots.describe as one regex: the alternatives in the same order (most specific
        # root first), each a root followed by "/" or the end of the path
        prefixes = roots._prefixes()
        self._where_rx = re.compile(
            "|".join(f"({re.escape(prefix[:-1])})(?=/|\\Z)" for prefix, _ in prefixes) or "(?!)",
            re.DOTALL,
        )
        self._where_names = [name for _, name in prefixes]

    # -- construction ------------------------------------------------------

    @classmethod
    def load(
        cls,
        policy: str | os.PathLike[str] | None = None,
        worktree: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Guard:
        """Load a policy: explicit > $GUARD_POLICY > <worktree>/.openoxide/policy.toml > builtin."""
        roots = Roots.discover(cwd, worktree)
        spec, why = _policy_spec(policy, roots)
        managed = load_managed()  # first: an untrusted managed layer refuses everything
        return cls(load_policy(spec), roots, why, managed)

    @classmethod
    def load_shared(
        cls,
        policy: str | os.PathLike[str] | None = None,
        worktree: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> Guard:
        """:meth:`load` for a long-lived process: the same compiled Guard for the same
        roots and policy while every file it was built from still reads the same.

        The roots and the policy's discovery are worked out again for each call, and
        every file of the policy's ``extends`` chain is read again and compared, text
        and real path (:func:`guard.policy.loader.unchanged`); only the parsing,
        validation and compilation are saved. Thread-safe; keeps the last
        :data:`SHARED_GUARDS` Guards.
        """
        roots = Roots.discover(cwd, worktree)
        spec, why = _policy_spec(policy, roots)
        key = (spec, why, dataclasses.replace(roots, plans_reason=""))  # the same from any subdir
        with _shared_lock:
            g = _shared.pop(key, None)
        if g is None or not unchanged(g.loaded) or not managed_unchanged(g.managed):
            managed = load_managed()
            g = cls(load_policy(spec), roots, why, managed)
        with _shared_lock:
            _shared[key] = g  # the most recent last
            while len(_shared) > SHARED_GUARDS:
                del _shared[next(iter(_shared))]
        return g

    # -- agents ------------------------------------------------------------

    @property
    def agent_names(self) -> list[str]:
        return list(self.loaded.model.agents)

    def agent(self, name: str) -> Agent:
        try:
            return self.loaded.model.agents[name]
        except KeyError:
            known = ", ".join(self.agent_names) or "none"
            hint = did_you_mean(name, self.agent_names)
            raise GuardError(
                f"no agent {name!r} in policy {self.loaded.name}; {hint}agents: {known}"
            ) from None

    @property
    def plan_agent_name(self) -> str | None:
        names = [n for n, a in self.loaded.model.agents.items() if a.mode == "plan"]
        return "plan" if "plan" in names else (names[0] if names else None)

    @property
    def build_agent_name(self) -> str | None:
        names = [n for n, a in self.loaded.model.agents.items() if a.mode == "build"]
        return "build" if "build" in names else (names[0] if names else None)

    def patterns(self, agent: str, kind: EffectKind) -> dict[str, list[Pattern]]:
        """The parsed, located patterns of an agent's lists for one kind, in checking order
        (``protected`` first when it applies, then deny, ask, allow)."""
        return {name: list(ps) for name, ps in self._compiled(agent).lists[kind].items()}

    def _compiled(self, name: str) -> CompiledAgent:
        a = self._agents.get(name)
        if a is None:
            a = self._agents[name] = CompiledAgent(
                name, self.agent(name), self.loaded, self.root_map, self.managed,
                self.protected_patterns,
            )  # fmt: skip
        return a

    # -- deciding ----------------------------------------------------------

    def decide(
        self, agent: str, effects: Iterable[Effect], cwd: str | os.PathLike[str] | None = None
    ) -> Decision:
        """The strictest decision over ``effects`` (deny > ask > allow). Never raises."""
        try:
            decisions = [self.decide_effect(agent, e, cwd) for e in effects]
        except Exception as exc:  # fail closed, whatever went wrong
            return error_decision(exc)
        if not decisions:
            return Decision(Action.DENY, "no effects to decide on", "guard.empty")
        worst = max(decisions, key=lambda d: d.action.severity)
        if worst.action is Action.ALLOW:
            # the most specific allow: a path effect's rather than the tool table's
            paths = [d for d in decisions if d.effect and d.effect.kind is not EffectKind.TOOL]
            return paths[-1] if paths else worst
        return worst

    def decide_effect(
        self, agent: str, effect: Effect, cwd: str | os.PathLike[str] | None = None
    ) -> Decision:
        """Decide one effect. Never raises: errors are denies."""
        try:
            return self._decide(agent, effect, cwd)
        except Exception as exc:
            return error_decision(exc, effect)

    def _decide(self, agent: str, effect: Effect, cwd: str | os.PathLike[str] | None) -> Decision:
        a = self._compiled(agent)
        kind = effect.kind
        if kind is EffectKind.TOOL:
            name = effect.target or ""
            d = a.tool_memo.get(name)
            if d is None:
                if len(a.tool_memo) >= MEMO_LIMIT:
                    a.tool_memo.clear()
                d = a.tool_memo[name] = self._managed_tool(a, self._decide_tool(a, effect))
            return d if d.effect == effect else with_effect(d, effect)
        if effect.target is None:
            if kind is EffectKind.NETWORK and effect.changes_remote and a.mode == "plan":
                return self._plan_network_refusal(a, "of an unknown host", effect)
            action, rule = a.kind_default(kind)
            why = effect.detail or "target unknown"
            floor = a.raised(kind, action)
            if floor is not None:
                action, rule = floor
                loc = rule.split(": ", 1)[-1]
                return Decision(
                    action,
                    f"{kind.value} of an unknown target ({why}): the managed policy's {loc}"
                    f" is {action}",
                    rule,
                    effect,
                )
            return Decision(
                action,
                f"{kind.value} of an unknown target ({why}): {rule} is {action}",
                rule,
                effect,
            )
        if kind is EffectKind.NETWORK:
            return self._decide_network(a, effect, effect.target)
        canon = canonicalize(effect.target, self._cwd(cwd),
                             write=kind in (EffectKind.WRITE, EffectKind.DELETE))
        if effect.creates_dir and kind is EffectKind.WRITE and a.mode == "plan":
            made = self._plan_dir_creation(a, canon, effect)
            if made is not None:
                return made
        decisions = [
            self._decide_path(a, kind, path, canon.is_dir, effect, None)
            for path in canon.candidates
        ]
        worst = max(decisions, key=lambda d: d.action.severity)
        if len(decisions) > 1:
            worst = with_reason(
                worst, worst.reason + f" (symlink {canon.link} -> {canon.real}: both checked)"
            )
        if kind is EffectKind.WRITE and worst.allowed:
            problem = plan_file_problem(canon, effect.target, self.roots.plans, effect.creates)
            if problem is not None:
                return Decision(Action.DENY, f"write {problem}", "guard.plan-file", worst.effect)
        return self._hardlink_check(a, kind, canon, worst)

    def _decide_network(self, a: CompiledAgent, effect: Effect, target: str) -> Decision:
        """A host or ``host:port`` (:mod:`guard.network`): deny > ask > allow (> model_api
        for connections made under guard run) > default; in plan mode, an effect that may
        change the remote is refused unless the host agent's model API list allowed it."""
        host, port = split_target(target)
        path, is_dir = target_path(host, port)
        run = effect.via == "run"
        d = self._decide_path(a, EffectKind.NETWORK, path, is_dir, effect,
                              format_target(host, port), run=run)
        if effect.changes_remote and a.mode == "plan" and d.action is not Action.DENY and \
                f"agents.{a.name}.network.model_api" not in d.rule:
            return self._plan_network_refusal(a, format_target(host, port), effect)
        return d

    def _plan_network_refusal(self, a: CompiledAgent, where: str, effect: Effect) -> Decision:
        what = effect.detail or "a request that may change the remote"
        return Decision(
            Action.DENY,
            f"network {where}: {what}; agents.{a.name} is a plan-mode agent: it may read"
            " from a remote, never change one (plain HTTP: GET, HEAD and OPTIONS only)",
            PLAN_NETWORK_RULE,
            effect,
        )

    def _plan_dir_creation(
        self, a: CompiledAgent, canon: CanonicalPath, effect: Effect
    ) -> Decision | None:
        """``mkdir`` of ``{plans}`` or of its missing parents inside the worktree (or the
        data dir): allowed to a plan agent that may write plan files there. Only these
        directories, through no link; anything else is decided as a write."""
        plans = self.roots.plans
        top = self.roots.worktree if self.roots.worktree is not None else self.roots.data
        allowed = {plans, *[p for p in plans.parents if top in p.parents]}
        if canon.link != canon.real or Path(canon.real) not in allowed:
            return None
        probe = self._decide_path(a, EffectKind.WRITE, str(plans / "plan.md"), False, effect, None)
        if not probe.allowed:
            return None
        where = self.roots.describe(canon.real)
        return Decision(
            Action.ALLOW,
            f"mkdir {where}: creating the plan directory (only the directory; each plan"
            " file is decided on its own)",
            "guard.plan-dir",
            effect,
        )

    def _cwd(self, cwd: str | os.PathLike[str] | None) -> str:
        if cwd is not None:
            return os.fspath(cwd)
        if self.roots.worktree is not None:
            return str(self.roots.worktree)
        return os.getcwd()

    def _hardlink_check(
        self, a: CompiledAgent, kind: EffectKind, canon: CanonicalPath, d: Decision
    ) -> Decision:
        if kind is EffectKind.WRITE and a.mode == "plan" and canon.nlink > 1 and d.allowed:
            return Decision(
                Action.DENY,
                f"write {self.roots.describe(canon.real)}: the file has {canon.nlink} hard links;"
                " writing it would change other paths too",
                "guard.hardlink",
                d.effect,
            )
        return d

    def _decide_path(
        self,
        a: CompiledAgent,
        kind: EffectKind,
        path: str,
        is_dir: bool,
        effect: Effect,
        shown: str | None,
        run: bool = False,
    ) -> Decision:
        """Decide one canonical path (``shown`` as the reason names it, else as
        :meth:`Roots.describe` would): memoized per path, and per deciding pattern."""
        key = (kind, path if not run else "run:" + path, is_dir)
        memo = a.memo.get(key)
        if memo is not None:
            return memo if memo.effect == effect else with_effect(memo, effect)
        names, rules = a.rules[kind] if not run else a.run_rules
        hit = rules.first(path, is_dir)
        pkey = (kind, hit[0], id(hit[1])) if hit is not None else (kind, -1, 0)
        verdict = a.parts.get(pkey)
        if verdict is None:
            verdict = a.parts[pkey] = self._rule_walk(a, kind, names, hit)
        action, rule, head, tail = verdict
        if shown is None:  # Roots.describe, as one regex
            m = self._where_rx.match(path)
            shown = path if m is None else self._where_names[m.lastindex - 1] + path[m.end() :]  # type: ignore[operator]
        decision = new_decision(action, head + shown + tail, rule, effect)
        if len(a.memo) >= MEMO_LIMIT:
            a.memo.clear()
        a.memo[key] = decision
        return decision

    def _rule_walk(
        self, a: CompiledAgent, kind: EffectKind, names: tuple[str, ...], hit: Hit | None
    ) -> ListRuling:
        """The rule walk, given ``hit``: the first list in checking order (protected >
        managed deny > deny > managed ask > ask > allow [> model_api]) whose deciding
        pattern (the last one matching the deepest level any of its patterns matches) is
        not an exception, and that pattern (:meth:`guard.match.RuleSet.first`).

        That list decides; no list: the kind's default. Then the managed floor raises
        what the agent's own lists decided (a managed list decides as written)."""
        if hit is not None:
            list_name = names[hit[0]]
            action, rule, tail = self._pattern_verdict(a, kind, list_name, hit[1])
        else:
            list_name = ""
            action, rule = a.kind_default(kind)
            tail = f": no rule matches; {rule} is {action}"
        floor = None if list_name.startswith("managed.") else a.raised(kind, action)
        if floor is not None:  # only an allow or ask can be raised: denies come first
            loc = floor[1].split(": ", 1)[-1]
            tail = (f": no managed list decides it; the managed policy's {loc} is"
                    f" {floor[0]} (the rest of the policy says {action})")  # fmt: skip
            action, rule = floor
        return action, rule, kind.value + " ", tail

    def _pattern_verdict(
        self, a: CompiledAgent, kind: EffectKind, list_name: str, p: Pattern
    ) -> tuple[Action, str, str]:
        """What pattern ``p`` of list ``list_name`` decides: the action, the rule, and the
        reason after "KIND WHERE"."""
        if list_name == "protected":
            rule = f"{PROTECTED_SOURCE}: {p.text!r}"
            why = f": protected path ({p.text!r}); agents.{a.name}.protected is true"
            return Action.DENY, rule, why
        src = p.source
        if list_name.startswith("managed."):
            action = LIST_ACTION[list_name.split(".")[2].split("@")[0]]
            key = f"{src.key}[{src.index}]" if src else list_name
            rule = f"{src.file}:{src.line}: {key} {p.text!r}" if src else key
            verb = "denied" if action is Action.DENY else "needs approval"
            why = (
                f": {verb} by the managed policy {key} {p.text!r}"
                f" ({src.file if src else 'managed'}); no other policy can change that"
            )
            return action, rule, why
        action = LIST_ACTION[list_name]
        loc = f"agents.{a.name}.{kind.value}.{list_name}"
        rule = f"{src.file}:{src.line}: {loc}[{src.index}] {p.text!r}" if src else loc
        verb = {
            "deny": "denied", "ask": "needs approval", "allow": "allowed",
            "model_api": "allowed under guard run (the host agent's model API)",
        }[list_name]  # fmt: skip
        return action, rule, f": {verb} by {loc} {p.text!r}"

    def _decide_tool(self, a: CompiledAgent, effect: Effect) -> Decision:
        name = effect.target or ""
        if name.startswith("task:") and a.policy.subagents is not None:
            sub = name[5:]
            if "*" in a.policy.subagents or sub in a.policy.subagents:
                return Decision(
                    Action.ALLOW,
                    f"subagent {sub!r} is listed in agents.{a.name}.subagents; it inherits"
                    f" {a.name}'s rules",
                    self._rule_at(("agents", a.name, "subagents"), f"agents.{a.name}.subagents"),
                    effect,
                )
            return Decision(
                Action.DENY,
                f"subagent {sub!r} is not in agents.{a.name}.subagents"
                f" ({', '.join(a.policy.subagents) or 'empty'})",
                self._rule_at(("agents", a.name, "subagents"), f"agents.{a.name}.subagents"),
                effect,
            )
        if name.startswith("task:"):
            name = "task"
        tools = a.policy.tools
        if name in tools:
            action, key = tools[name], name
        elif "*" in tools:
            action, key = tools["*"], "*"
        else:
            action = a.default
            rule = f"agents.{a.name}.default"
            return Decision(
                action,
                f"tool {name!r} is not in agents.{a.name}.tools; {rule} is {action}",
                rule,
                effect,
            )
        loc = f"agents.{a.name}.tools.{key}" if key != "*" else f'agents.{a.name}.tools."*"'
        rule = self._rule_at(("agents", a.name, "tools", key), loc)
        return Decision(action, f"tool {name!r}: {loc} is {action}", rule, effect)

    def _managed_tool(self, a: CompiledAgent, d: Decision) -> Decision:
        """``d`` raised to the managed layer's tool entry, when that is stricter."""
        if self.managed is None:
            return d
        name = d.effect.target if d.effect is not None and d.effect.target else ""
        found = self.managed.tool(a.mode, "task" if name.startswith("task:") else name)
        if found is None or found[0].severity <= d.action.severity:
            return d
        action, rule = found
        loc = rule.split(": ", 1)[-1]
        return Decision(
            action,
            f"tool {name!r}: the managed policy's {loc} is {action}; no other policy can"
            " change that",
            rule,
            d.effect,
        )

    @property
    def audit_settings(self) -> Audit:
        """The effective ``[audit]`` table (the managed layer's keys win)."""
        own = self.loaded.model.audit
        return own if self.managed is None else self.managed.audit(own)

    @property
    def digest(self) -> str:
        """SHA-256 over the merged policy and the managed layer: one value per policy in force."""
        if self.managed is None:
            return self.loaded.digest

        text = f"guard-policy 1\0{self.loaded.digest}\0{self.managed.digest}"
        return sha256(text.encode()).hexdigest()

    def _rule_at(self, loc: tuple[str | int, ...], text: str) -> str:
        f, line = self.loaded.locate(loc)
        return f"{f}:{line}: {text}"

    # -- explaining --------------------------------------------------------

    def explain(
        self, agent: str, effect: Effect, cwd: str | os.PathLike[str] | None = None
    ) -> Explanation:
        """Every list consulted, every pattern that matched, and what decided."""
        a = self._compiled(agent)
        decision = self.decide_effect(agent, effect, cwd)
        lists: dict[str, list[ListHit]] = {}
        paths: list[str] = []
        if effect.kind is not EffectKind.TOOL and effect.target is not None:
            if effect.kind is EffectKind.NETWORK:
                try:
                    path, is_dir = target_path(*split_target(effect.target))
                except GuardError:
                    candidates, is_dir = [], False
                else:
                    candidates = [path]
            else:
                try:
                    canon = canonicalize(effect.target, self._cwd(cwd))
                except GuardError:
                    candidates, is_dir = [], False
                else:
                    candidates, is_dir = list(canon.candidates), canon.is_dir
            for path in candidates:
                paths.append(path)
                hits = []
                for list_name, patterns in a.lists[effect.kind].items():
                    cl = CompiledList(patterns, a.roots[effect.kind])
                    hits.append(
                        ListHit(list_name, cl.explain(path, is_dir), cl.match(path, is_dir))
                    )
                lists[path] = hits
        return Explanation(agent, effect, paths, lists, decision)


def load(policy: str | Path | None = None, worktree: str | Path | None = None) -> Guard:
    """Shorthand for :meth:`Guard.load`."""
    return Guard.load(policy, worktree)
