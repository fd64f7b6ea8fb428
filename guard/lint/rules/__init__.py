"""The rule catalog: one module per family; importing this package registers every rule.

Codes are stable: GL0xx schema and names, GL1xx patterns, GL2xx plan-mode isolation,
GL3xx composition (extends).
"""

from guard.lint.rules import extends, network, patterns, plan, schema, tools

__all__ = ["extends", "network", "patterns", "plan", "schema", "tools"]

from guard.lint.model import RULES as _RULES

for _code in sorted(_RULES):  # catalog order: by code
    _RULES[_code] = _RULES.pop(_code)
