"""One agent's rules compiled against concrete roots: what :mod:`guard.decide` walks.

Per effect kind, the agent's lists in checking order (protected > managed deny >
deny > managed ask > ask > allow, see guard/policy/managed.py), compiled together
into one :class:`~guard.match.RuleSet` so that one walk over a path answers them
all; the managed layer's floor per kind; and the memos of the agent's decisions.
"""

from __future__ import annotations

from guard.effects import Action, Decision, EffectKind
from guard.match import Pattern, RuleSet
from guard.network import NETWORK_ROOT
from guard.policy import LoadedPolicy, patterns_of
from guard.policy.managed import ManagedLayer
from guard.policy.valid import Agent

#: an agent's own lists of each kind, in checking order
LISTS = ("deny", "ask", "allow")
#: what a deciding pattern decides: (action, rule, "KIND ", the reason after "KIND WHERE")
ListRuling = tuple[Action, str, str, str]
#: what one walk over a path found (:meth:`RuleSet.first`): (list index, deciding pattern)
Hit = tuple[int, Pattern]


class CompiledAgent:
    """One agent's rules, compiled against concrete roots."""

    def __init__(
        self,
        name: str,
        policy: Agent,
        loaded: LoadedPolicy,
        roots: dict[str, str | None],
        managed: ManagedLayer | None,
        protected: list[Pattern],
    ) -> None:
        self.name = name
        self.policy = policy
        self.mode = policy.mode
        self.default = policy.default
        self.loaded = loaded
        m = managed
        self.lists: dict[EffectKind, dict[str, list[Pattern]]] = {}
        for kind in EffectKind:
            if kind is EffectKind.TOOL:
                continue
            own = {ln: patterns_of(loaded, name, kind.value, ln) for ln in LISTS}
            lists: dict[str, list[Pattern]] = {}
            if policy.protected and kind in (EffectKind.WRITE, EffectKind.DELETE):
                lists["protected"] = protected
            # protected > managed deny > deny > managed ask > ask > allow (guard/policy/managed.py)
            for ln in LISTS:
                if m is not None and ln != "allow":
                    lists.update(m.lists(policy.mode, kind.value, ln))
                lists[ln] = own[ln]
            if kind is EffectKind.NETWORK:
                lists = {ln: [p for p in ps if p.root == "worktree"] for ln, ps in lists.items()}
            self.lists[kind] = lists
        #: the managed layer's floor per kind: (action, rule) or None
        self.floor = {
            kind: (m.default(policy.mode, kind.value) if m is not None else None)
            for kind in self.lists
        }
        self.roots = {
            k: roots if k is not EffectKind.NETWORK else {"worktree": NETWORK_ROOT}
            for k in self.lists
        }
        # every list of a kind compiled together: one walk answers them all
        self.rules: dict[EffectKind, tuple[tuple[str, ...], RuleSet]] = {
            kind: (tuple(lists), RuleSet(list(lists.values()), self.roots[kind]))
            for kind, lists in self.lists.items()
        }
        self._run_rules: tuple[tuple[str, ...], RuleSet] | None = None
        #: decisions by (kind, canonical path, is_dir); "run:" before the path under guard run
        self.memo: dict[tuple[EffectKind, str, bool], Decision] = {}
        #: verdicts by (kind, list, id of the deciding pattern): the patterns live as long
        #: as this; one entry per pattern at most, so it is not bounded
        self.parts: dict[tuple[EffectKind, int, int], ListRuling] = {}
        self.tool_memo: dict[str, Decision] = {}  # by tool name (the policy never changes)

    @property
    def run_rules(self) -> tuple[tuple[str, ...], RuleSet]:
        """The network lists for connections made under guard run: the host agent's model
        API (``model_api``) is allowed too, after deny, ask and allow. Compiled when first
        needed (most processes never decide such a connection)."""
        if self._run_rules is None:
            run_lists = {
                **self.lists[EffectKind.NETWORK],
                "model_api": patterns_of(self.loaded, self.name, "network", "model_api"),
            }
            self._run_rules = (
                tuple(run_lists),
                RuleSet(list(run_lists.values()), self.roots[EffectKind.NETWORK]),
            )
        return self._run_rules

    def kind_default(self, kind: EffectKind) -> tuple[Action, str]:
        rules = getattr(self.policy, kind.value)
        if rules.default is not None:
            return rules.default, f"agents.{self.name}.{kind.value}.default"
        return self.default, f"agents.{self.name}.default"

    def raised(self, kind: EffectKind, action: Action) -> tuple[Action, str] | None:
        """The managed floor of ``kind`` when it is stricter than ``action``, else None."""
        floor = self.floor.get(kind)
        if floor is not None and floor[0].severity > action.severity:
            return floor
        return None
