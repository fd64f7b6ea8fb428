"""The analyser names the network effects of known programs, so that a plan-mode agent
learns why before guard's egress proxy (or the kernel) refuses: a push, a merge, an
apply, a POST, a publish is a network effect that changes a remote, refused in plan
mode with a reason naming it; in build mode the network rules alone decide."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Guard
from guard.analysis import ToolCall, effects_for
from guard.effects import Action, EffectKind
from guard.gate import Gate

CHANGES = {
    "git push origin main": "git push sends commits to a remote",
    "gh pr merge 3 --squash": "gh pr merge changes GitHub",
    "gh issue create -t x": "gh issue create changes GitHub",
    "gh api -X DELETE repos/o/r": "gh api sends a DELETE request to GitHub",
    "gh api repos/o/r/issues -f title=x": "gh api sends a POST request to GitHub",
    "kubectl apply -f deploy.yaml": "kubectl apply changes objects in the cluster",
    "kubectl -n prod delete pod x": "kubectl delete changes objects in the cluster",
    "curl -X POST https://api.example.com/orders": "curl -X POST sends a POST request to"
                                                   " api.example.com",
    "curl -d a=1 https://api.example.com/": "curl -d sends a POST request",
    "curl --data-binary @f https://api.example.com/": "curl -d sends a POST request",
    "curl --json {} https://api.example.com/": "curl -d sends a POST request",
    "curl -T f.tar https://files.example.com/": "curl -T sends a PUT request",
    "curl -F file=@f https://api.example.com/": "curl -F sends a POST request",
    "curl --request PATCH https://api.example.com/x": "curl -X PATCH sends a PATCH request",
    "wget --post-data=a=1 https://api.example.com/": "wget sends a POST request",
    "npm publish": "npm publish uploads a package to the npm registry",
    "terraform apply -auto-approve": "terraform apply changes real infrastructure",
    "terraform state push s.tfstate": "terraform state push overwrites the remote state",
    "docker push registry.example.com/app:1": "docker push uploads an image to a registry",
}


@pytest.mark.parametrize("command", sorted(CHANGES))
def test_plan_mode_refuses_remote_changes_naming_them(repo: Path, command: str) -> None:
    gate = Gate(guard=Guard.load(worktree=repo), agent="plan", sessions=False)
    v = gate.decide(ToolCall("claude-code", "Bash", {"command": command}, str(repo)))
    assert v.action.value == "deny", v
    assert v.rule == "guard.plan-network", v
    assert CHANGES[command] in v.reason, v.reason
    assert "plan-mode agent: it may read from a remote, never change one" in v.reason


@pytest.mark.parametrize("command", ["curl https://docs.example.com/",
                                     "curl -I https://docs.example.com/",
                                     "curl -G -d q=1 https://docs.example.com/",
                                     "gh pr view 3", "gh api repos/o/r", "wget -O - https://x.org/"])
def test_reading_commands_carry_no_remote_change(command: str) -> None:
    effects = effects_for("claude-code", "Bash", {"command": command}, "/w")
    net = [e for e in effects if e.kind is EffectKind.NETWORK]
    assert net and not any(e.changes_remote for e in net), effects


def test_build_mode_decides_remote_changes_by_the_network_rules(repo: Path) -> None:
    (repo / "p.toml").write_text(
        'version = 1\nextends = ["builtin:default"]\n'
        '[agents.build.network]\nallow = ["api.example.com"]\n'
    )
    g = Guard.load(repo / "p.toml", worktree=repo)
    gate = Gate(guard=g, agent="build", sessions=False)
    v = gate.decide(ToolCall("claude-code", "Bash",
                             {"command": "curl -X POST https://api.example.com/orders"},
                             str(repo)))
    assert v.action.value == "allow", v
    assert g.decide("plan", v.effects).action is Action.DENY
