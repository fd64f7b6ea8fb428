"""Rule pages: docs/rules/<CODE>.md is generated from the catalog.

Regenerate with ``python -m guard.lint.docs docs/rules``; a test keeps them in sync.
"""

from __future__ import annotations

import sys
from pathlib import Path

from guard.lint import rules as _rules  # noqa: F401  (registers the catalog)
from guard.lint.findings import RULES, Rule


def rule_page(r: Rule) -> str:
    parts = [
        f"# {r.code} `{r.name}`\n",
        f"Default level: **{r.level.value}**\n",
        f"## What it does\n\n{r.summary}\n",
        f"## Why it matters\n\n{r.why}\n",
        f"## Example\n\n```toml\n{r.bad}\n```\n",
        f"## How to fix\n\n{r.fix}\n",
    ]
    if r.good:
        parts.append(f"```toml\n{r.good}\n```\n")
    parts.append(
        "## Configure\n\n"
        f'In `pyproject.toml`: `[tool.guard.lint]` `ignore = ["{r.code}"]`, or'
        f' `[tool.guard.lint.levels]` `{r.code} = "warning"`; the same keys work in a'
        " policy's `[lint]` table.\n"
    )
    return "\n".join(parts)


_USAGE = """\
`guard lint [FILES...]` checks policy files (default: the policy guard would use
here). Codes are stable: GL0xx schema and names, GL1xx patterns, GL2xx plan-mode
isolation, GL3xx `extends` chains, GL4xx rules the managed layer overrides.
Plan-mode rules decide with the real evaluator on an imaginary worktree, probing
every pattern with sample paths.

```sh
guard lint policies/ .openoxide/policy.toml   # pretty output
guard lint --format sarif > guard.sarif       # SARIF 2.1.0 for code scanning
guard lint --format github                    # GitHub Actions annotations
guard lint --format json                      # machine-readable
guard lint --fail-level warning               # exit 3 on warnings too
guard lint --explain GL201                    # one rule's page
```

Exit status: 0 clean, 3 findings at or above `--fail-level` (default `error`),
2 unreadable input or bad configuration.

Configuration, in `pyproject.toml` (or a policy's own `[lint]` table, applied on
top for that file):

```toml
[tool.guard.lint]
ignore = ["GL105"]

[tool.guard.lint.levels]
GL104 = "error"   # error | warning | note | off
```

pre-commit (`.pre-commit-config.yaml`), with guard already installed (pipx, uv
tool, a virtualenv on PATH):

```yaml
- repo: local
  hooks:
    - id: guard-lint
      name: guard lint
      entry: guard lint
      language: system
      files: (^|/)(\\.openoxide/policy\\.(toml|json)|policies/[^/]+\\.(toml|json))$
```

or let pre-commit install guard from a clone of its repository (a path or any
URL git can clone). `rev` must name a commit: a full commit SHA
(`git -C /path/to/openoxide-guard rev-parse HEAD`); releases are tagged
`v<version>` (annotated tags, e.g. `v0.1.0`) once they are cut, and a tag works too:

```yaml
- repo: /path/to/openoxide-guard
  rev: 0123456789abcdef0123456789abcdef01234567   # a commit SHA of that clone
  hooks:
    - id: guard-lint
```
"""


def index_page() -> str:
    lines = [
        "# guard lint rules\n",
        _USAGE,
        "## Catalog\n",
        "| code | name | level | what it finds |",
        "|---|---|---|---|",
    ]
    for r in RULES.values():
        lines.append(f"| [{r.code}]({r.code}.md) | `{r.name}` | {r.level.value} | {r.summary} |")
    return "\n".join(lines) + "\n"


def write_pages(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for r in RULES.values():
        p = directory / f"{r.code}.md"
        p.write_text(rule_page(r), encoding="utf-8")
        written.append(p)
    idx = directory / "README.md"
    idx.write_text(index_page(), encoding="utf-8")
    written.append(idx)
    return written


if __name__ == "__main__":
    for path in write_pages(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/rules")):
        print(path)
