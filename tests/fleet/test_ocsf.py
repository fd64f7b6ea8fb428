"""Audit records as OCSF API Activity events, validated against OCSF's published object
definitions (py-ocsf-models 0.10.0).

py-ocsf-models 0.10.0 ships OCSF's objects and the Findings classes, not the API Activity
class itself: the class's own attributes (class, category, activity and type ids, from
the OCSF schema) are checked here by a model built on the package's BaseEvent, and every
object the event holds (metadata and product, api and service, actor's user and account)
by the package's own models.
"""

from __future__ import annotations

from typing import Any, Literal

import pytest
from py_ocsf_models.events.base_event import BaseEvent
from py_ocsf_models.objects.api import API
from py_ocsf_models.objects.metadata import Metadata
from py_ocsf_models.objects.user import User
from pydantic import BaseModel, ConfigDict

from guard.audit.sinks import AuditLog
from guard.effects import Effect, ToolCall
from guard.fleet.ocsf import to_ocsf
from guard.fleet.records import stamp
from guard.gate import Gate
from guard.monitor.events import Notice, Violation


class Session(BaseModel):
    model_config = ConfigDict(extra="forbid")
    uid: str


class Actor(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: User
    session: Session
    app_name: str


class Endpoint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hostname: str


class ApiActivity(BaseEvent):  # type: ignore[misc]
    """OCSF 1.3 API Activity (class_uid 6003, category 6): its required attributes."""

    model_config = ConfigDict(extra="forbid")
    class_uid: Literal[6003]
    class_name: Literal["API Activity"]
    category_uid: Literal[6]
    category_name: Literal["Application Activity"]
    activity_id: Literal[0, 1, 2, 3, 4, 99]
    type_uid: int
    time: int
    actor: Actor
    api: API
    src_endpoint: Endpoint
    metadata: Metadata


def records(repo: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    class Keep(AuditLog):
        def write(self, record: Any, roots: Any = None) -> None:
            out.append(dict(record))

    gate = Gate(sink=Keep(), source="check", agent="plan")
    call = ToolCall("effect", "write", {}, str(repo), session="s-1")
    gate.record(gate.decide(call, effects=[Effect.write("src/app.py")]))
    gate.record(gate.decide(call, effects=[Effect.write(".openoxide/plans/p.md")]))
    read = ToolCall("effect", "read", {}, str(repo))
    gate.record(gate.decide(read, effects=[Effect.read("src/app.py")]))
    v = Violation("2026-12-04T10:00:00.000000Z", "s-2", "plan", "modified", "src/app.py",
                  "agents.plan.write.default", "denied", "reported").to_json()
    out.append(stamp(v, None))
    out.append(stamp(Notice("2026-12-04T10:00:01.000000Z", "s-2", "backend", "inotify")
                     .to_json(), None))
    return out


def test_every_record_maps_to_a_valid_api_activity(repo: Any) -> None:
    recs = records(repo)
    assert {r["type"] for r in recs} == {"verdict", "violation", "notice"}
    for r in recs:
        event = ApiActivity.model_validate(to_ocsf(r))
        assert event.type_uid == 600300 + event.activity_id
        assert event.metadata.uid == r["record_id"]
        assert event.metadata.product.version == r["guard_version"]
        assert event.src_endpoint.hostname == r["hostname"]
        assert event.time > 1_700_000_000_000
    deny, allow, read = (to_ocsf(r) for r in recs[:3])
    assert deny["status"] == "Failure" and deny["activity_id"] == 3 and deny["severity_id"] == 3
    assert allow["status"] == "Success" and allow["unmapped"]["decision"] == "allow"
    assert read["activity_id"] == 2
    assert deny["unmapped"]["policy_digest"].startswith("sha256:")


def test_a_record_missing_a_required_object_is_refused(repo: Any) -> None:
    """The check can fail: an event without its api object does not validate."""
    event = to_ocsf(records(repo)[0])
    del event["api"]
    with pytest.raises(Exception, match="api"):
        ApiActivity.model_validate(event)


def test_the_ocsf_event_carries_the_chain_keys_of_the_record(repo: Any, tmp_path: Any) -> None:
    """A record written through the real audit log carries the chain keys (docs/fleet.md);
    its OCSF event keeps them in ``unmapped``, to be joined to the verified record."""
    log = tmp_path / "audit.jsonl"
    out: list[dict[str, Any]] = []

    class Log(AuditLog):
        def write(self, record: Any, roots: Any = None) -> None:
            super().write(record, roots)
            out.append(dict(record))

    gate = Gate(sink=Log(log), source="check", agent="plan")
    gate.record(gate.decide(
        ToolCall("effect", "write", {}, str(repo), session="s-1"),
        effects=[Effect.write("src/app.py")]))
    [r] = out
    event = to_ocsf(r)
    ApiActivity.model_validate(event)
    assert {k: event["unmapped"][k] for k in ("chain_seq", "chain", "chain_prev", "chain_log")} \
        == {"chain_seq": 1, "chain": r["chain"], "chain_prev": "", "chain_log": "audit.jsonl"}
    assert event["metadata"]["uid"] == r["record_id"]
