"""A guard audit record as an OCSF event: API Activity (class 6003, docs/fleet.md).

A tool call an agent makes is an API call to the host agent's tools: ``api.operation``
is the tool, ``actor`` the user and the session, ``status`` whether guard let it run
(Success) or not (Failure), ``severity`` how far it is from a plain allow, and guard's
own fields (decision, rule, policy digests) go to ``unmapped``. Monitor violations and
notices map to the same class with ``activity_id`` 99 (Other). The mapping is validated
against OCSF's published object definitions (the ``py-ocsf-models`` package) in
tests/fleet/test_ocsf.py.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

OCSF_VERSION = "1.3.0"
CLASS_UID = 6003  # API Activity
CATEGORY_UID = 6  # Application Activity
#: API Activity's activity_id by effect kind: Create 1, Read 2, Update 3, Delete 4, Other 99
ACTIVITY = {"read": 2, "write": 3, "delete": 4}
SEVERITY = {"allow": 1, "allow_confined": 1, "ask": 2, "deny": 3}  # Informational, Low, Medium
UNMAPPED = (
    "decision", "reason", "rule", "policy_decision", "answered", "agent", "agent_from",
    "dialect", "policy_digest", "policy_files", "guard_version", "audit_schema", "type",
    "source", "event", "path", "effects", "effect", "action_taken", "cwd",
    "chain_seq", "chain", "chain_prev", "chain_log",
)  # fmt: skip


def _time_ms(ts: str) -> int:
    try:
        return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def to_ocsf(r: dict[str, Any]) -> dict[str, Any]:
    """The OCSF API Activity event for audit record ``r``."""
    kind = r.get("type")
    decision = str(r.get("decision") or "")
    found = r.get("effect")
    effect: dict[str, Any] = found if isinstance(found, dict) else {}
    activity = ACTIVITY.get(str(effect.get("kind")), 99) if kind == "verdict" else 99
    allowed = decision in ("allow", "allow_confined")
    severity = SEVERITY.get(decision, 2) if kind == "verdict" else (4 if kind == "violation"
                                                                       else 1)
    host_agent = r.get("host_agent") or r.get("source") or "guard"
    user = str(r.get("user") or r.get("uid") or "unknown")
    uid = str(r.get("uid") if r.get("uid") is not None else user)
    event: dict[str, Any] = {
        "class_uid": CLASS_UID,
        "class_name": "API Activity",
        "category_uid": CATEGORY_UID,
        "category_name": "Application Activity",
        "activity_id": activity,
        "type_uid": CLASS_UID * 100 + activity,
        "time": _time_ms(str(r.get("ts") or "")),
        "severity_id": severity,
        "status_id": 1 if (kind != "verdict" or allowed) else 2,
        "status": "Success" if (kind != "verdict" or allowed) else "Failure",
        "message": str(r.get("reason") or r.get("message") or ""),
        "metadata": {
            "version": OCSF_VERSION,
            "uid": str(r.get("record_id") or ""),
            "original_time": str(r.get("ts") or ""),
            "correlation_uid": r.get("session"),
            "product": {"name": "OpenOxide Guard", "vendor_name": "OpenOxide",
                        "version": str(r.get("guard_version") or "")},
            "log_name": "guard-audit",
            "log_provider": "openoxide-guard",
            "log_version": str(r.get("audit_schema") or ""),
        },
        "actor": {
            "user": {"name": user, "uid": uid, "type_id": 2 if uid == "0" else 1,  # Admin, User
                     "account": {"name": user, "uid": uid, "type_id": 9}},  # Linux Account
            "session": {"uid": str(r.get("session") or "")},
            "app_name": str(host_agent),
        },
        "api": {
            "operation": str(r.get("tool_name") or kind or "-"),
            "service": {"name": str(host_agent), "uid": str(host_agent),
                        "version": str(r.get("host_agent_version") or "")},
        },
        "src_endpoint": {"hostname": str(r.get("hostname") or "")},
        "unmapped": {k: r[k] for k in UNMAPPED if k in r},
    }
    return event
