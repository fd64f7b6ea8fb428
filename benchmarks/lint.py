"""Benchmark: `guard lint` on a generated 1,000-rule policy.

Baseline, measured in the same run: loading that policy and compiling the
evaluator for both agents (``Guard`` + one decision each), which every
``guard check`` pays. Printed last: the ratio lint time / baseline, and the lint
time itself.

    python benchmarks/lint.py [--rules 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from guard.decide import Guard
from guard.effects import Effect
from guard.lint import lint_paths
from guard.lint.rule_context import FAKE_ROOTS
from guard.policy import load_policy

WORDS = ["src", "docs", "lib", "tests", "build", "vendor", "assets", "config", "scripts", "pkg"]
EXTS = ["py", "ts", "md", "json", "toml", "lock", "env", "pem", "txt", "rs"]


def generate(rules: int, seed: int = 7) -> str:
    """A policy with ``rules`` patterns spread over two agents, kinds and lists."""
    rnd = random.Random(seed)
    lists: dict[tuple[str, str, str], list[str]] = {}
    keys = [
        (agent, kind, ln)
        for agent in ("plan", "build")
        for kind in ("read", "write", "delete", "exec")
        for ln in ("deny", "ask", "allow")
        if not (agent == "plan" and kind in ("write", "delete") and ln != "deny")
    ]
    for i in range(rules):
        key = keys[i % len(keys)]
        depth = rnd.randint(1, 3)
        parts = [rnd.choice(WORDS) + str(rnd.randint(0, 40)) for _ in range(depth)]
        shape = rnd.random()
        if shape < 0.3:
            pat = "/".join(parts) + "/**"
        elif shape < 0.6:
            pat = "/".join([*parts[:-1], f"*.{rnd.choice(EXTS)}"])
        elif shape < 0.8:
            pat = f"*.{rnd.choice(EXTS)}" if rnd.random() < 0.5 else parts[-1]
        elif shape < 0.9:
            pat = "/".join(parts) + f"/[a-f]*.{rnd.choice(EXTS)}"
        else:
            pat = "!" + "/".join(parts) + f"/keep.{rnd.choice(EXTS)}"
        lists.setdefault(key, []).append(pat)
    out = ["version = 1"]
    for agent, mode, default in (("plan", "plan", "deny"), ("build", "build", "ask")):
        out += [f"[agents.{agent}]", f'mode = "{mode}"', f'default = "{default}"']
        if agent == "plan":
            out += ["[agents.plan.tools]", 'update_plan = "deny"', 'todowrite = "deny"',
                    '"*" = "deny"']
        else:
            out += ["[agents.build.tools]", 'request_user_input = "deny"', '"*" = "allow"']
        for kind in ("read", "write", "delete", "exec"):
            out.append(f"[agents.{agent}.{kind}]")
            for ln in ("deny", "ask", "allow"):
                pats = lists.get((agent, kind, ln))
                if agent == "plan" and kind in ("write", "delete") and ln == "allow":
                    pats = ["{plans}/*.md"]
                if pats:
                    body = ",\n".join(f'  "{p}"' for p in pats)
                    out.append(f"{ln} = [\n{body},\n]")
    return "\n".join(out) + "\n"


def best_of(repeat: int, fn: object) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "policy.toml"
        path.write_text(generate(args.rules))
        report = lint_paths([str(path)])
        print(f"policy: {args.rules} patterns; findings: {len(report.findings)}"
              f" ({', '.join(sorted({f.code for f in report.findings})) or 'none'})")
        def baseline() -> None:
            g = Guard(load_policy(str(path)), FAKE_ROOTS)
            for agent in g.agent_names:
                g.decide_effect(agent, Effect.write(f"{FAKE_ROOTS.worktree}/src/x.py"))

        load = best_of(args.repeat, baseline)
        lint = best_of(args.repeat, lambda: lint_paths([str(path)]))
    print(f"baseline load + compile: {load * 1000:.1f} ms (best of {args.repeat})")
    print(f"guard lint:              {lint * 1000:.1f} ms (best of {args.repeat})")
    print(f"ratio lint/(load+compile): {lint / load:.2f}x; lint of {args.rules} rules:"
          f" {lint:.3f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
