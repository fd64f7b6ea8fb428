"""The rule catalog: one module per family; importing this package registers every rule.

Codes are stable: GL0xx schema and names, GL1xx patterns, GL2xx plan-mode isolation,
GL3xx composition (extends), GL4xx the managed layer.
"""

from guard.lint.rules import (
    extends_rules,
    kind_rules,
    managed_rules,
    network_rules,
    pattern_rules,
    plan_rules,
    schema_rules,
    tool_rules,
)

__all__ = [
    "extends_rules",
    "kind_rules",
    "managed_rules",
    "network_rules",
    "pattern_rules",
    "plan_rules",
    "schema_rules",
    "tool_rules",
]

from guard.lint.findings import RULES as _RULES

for _code in sorted(_RULES):  # catalog order: by code
    _RULES[_code] = _RULES.pop(_code)
