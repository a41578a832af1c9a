"""The service remembers what /v1/qos flagged per customer and VM type and refuses their next VMs the LI call."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
from fastapi.testclient import TestClient

from pond.serving import flag_memory
from pond.serving.app import create_app
from pond.serving.engine import Engine
from pond.serving.flag_memory import FlagMemory
from tests.serving.conftest import request_of, settings_for


class Clock:
    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_a_flag_refuses_its_group_for_the_hold_and_a_later_flag_extends_it():
    clock = Clock()
    m = FlagMemory(None, 2.0, clock)
    assert m.enabled and not m.refused("c1", "D4")
    assert m.remember("c1", "D4") == clock.t + 7200
    assert m.refused("c1", "D4") and not m.refused("c1", "D8") and not m.refused("c2", "D4")
    clock.t += 3600
    assert m.remember("c1", "D4") == clock.t + 7200          # extended from the later flag
    clock.t += 7199
    assert m.refused("c1", "D4")
    clock.t += 1
    assert not m.refused("c1", "D4")
    assert not FlagMemory(None, 0.0).enabled


def test_workers_share_their_flags_through_the_file_and_keep_them_over_a_restart(tmp_path, monkeypatch):
    monkeypatch.setattr(flag_memory, "REFRESH_S", 0.0)
    clock = Clock()
    a, b = FlagMemory(tmp_path / "f" / "flags.db", 1.0, clock), FlagMemory(tmp_path / "f" / "flags.db", 1.0, clock)
    a.open()
    b.open()
    assert not b.refused("c1", "D4")
    a.remember("c1", "D4")
    assert b.refused("c1", "D4") and not b.refused("c1", "D8")
    b.remember("c1", "D8")
    assert a.refused("c1", "D8")
    a.close()
    b.close()
    again = FlagMemory(tmp_path / "f" / "flags.db", 1.0, clock)
    again.open()
    assert again.refused("c1", "D4") and again.refused("c1", "D8")
    clock.t += 3601
    assert not again.refused("c1", "D4")
    again.close()


def _li_call(engine, next_day_vms) -> pd.Series:
    """A request the served policy calls insensitive (a bundle's own next day)."""
    cols = {c: next_day_vms[c].tolist() for c in ["customer_id", "vm_type", "vcpus", "memory_gb", "os", "region",
                                                   "cluster_id"]}
    out = engine.allocate(cols)
    called = np.flatnonzero(out["li_called"])
    assert len(called), "the small bundle's served policy calls no VM insensitive"
    return next_day_vms.iloc[called[0]]


def _flagged_counters(small_raw, engine) -> dict:
    """A /v1/qos body the monitor flags: a VM of the small fleet all on the pool."""
    counters = pd.read_parquet(small_raw / "vm_counters.parquet")
    events = list(engine.snapshot["events"])
    ratio = engine.policy.latency_ratio
    p = engine.monitor.p_exceeds(counters[events], events, np.ones(len(counters)), np.full(len(counters), ratio))
    flagged = np.flatnonzero(p >= engine.monitor.threshold(ratio, whole=True))
    assert len(flagged), "no counters of the small fleet are flagged on the pool"
    return {"vm_id": "v", "counters": {e: float(counters.iloc[flagged[0]][e]) for e in events},
            "allocation": {"memory_gb": 32.0, "pool_gb": 32.0}}


def test_a_flag_on_v1_qos_refuses_the_li_call_to_the_customer_and_vm_type(small_bundle, small_raw, next_day_vms,
                                                                         tmp_path):
    policy = json.loads((small_bundle / "policy.json").read_text())
    policy["serve"] = {"policy": "combined", "pool_cap": None}       # the small fleet's own serves UM only
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    settings = settings_for(small_bundle).model_copy(update={"policy": tmp_path / "policy.json"})
    engine = Engine.load(settings.bundle_paths())
    row = _li_call(engine, next_day_vms)
    req = request_of(row)
    with TestClient(create_app(settings)) as c:
        before = c.post("/v1/allocations", json=req).json()
        assert before["p_insensitive"] is not None and before["decision"] in ("pool_only", "znuma")
        flagged = _flagged_counters(small_raw, engine)
        assert c.post("/v1/qos", json=flagged).json()["li_refused_until"] is None   # no customer named
        assert c.post("/v1/allocations", json=req).json() == before
        r = c.post("/v1/qos", json={**flagged, "customer_id": row.customer_id}).json()
        assert r["detail"][0]["loc"] == ["body"] and "vm_type is missing" in r["detail"][0]["msg"]
        calm = {**flagged, "allocation": {"memory_gb": 32.0, "pool_gb": 0.0}}      # nothing on the pool: no flag
        r = c.post("/v1/qos", json={**calm, "customer_id": row.customer_id, "vm_type": row.vm_type}).json()
        assert r["action"] == "none" and r["li_refused_until"] is None
        assert c.post("/v1/allocations", json=req).json() == before
        r = c.post("/v1/qos", json={**flagged, "customer_id": row.customer_id, "vm_type": row.vm_type}).json()
        assert r["action"] == "reconfigure_local" and r["li_refused_until"] is not None
        after = c.post("/v1/allocations", json=req).json()
        d = engine.allocate_one(row.customer_id, row.vm_type, float(row.vcpus), float(row.memory_gb), row.os,
                                row.region, row.cluster_id, refused=True)
        assert before["decision"] == "pool_only" and before["pool_gb"] == row.memory_gb
        assert after["p_insensitive"] is None and after["has_history"] and after["decision"] == d["decision"]
        assert after["pool_gb"] == d["pool_gb"] < before["pool_gb"] and d["decision"] != "pool_only"
        batch = c.post("/v1/allocations/batch", json={"requests": [req, {**req, "vm_type": row.vm_type + "x"}]}).json()
        assert batch["allocations"][0] == after
        assert batch["allocations"][1]["p_insensitive"] == c.post(
            "/v1/allocations", json={**req, "vm_type": row.vm_type + "x"}).json()["p_insensitive"]
    off = settings.model_copy(update={"qos_refusal_hours": 0.0})
    with TestClient(create_app(off)) as c:                                 # off: never refused
        r = c.post("/v1/qos", json={**flagged, "customer_id": row.customer_id, "vm_type": row.vm_type}).json()
        assert r["action"] == "reconfigure_local" and r["li_refused_until"] is None
        assert c.post("/v1/allocations", json=req).json() == before


def test_a_shared_file_that_fails_leaves_each_worker_its_own_flags_and_no_error(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(flag_memory, "REFRESH_S", 0.0)
    clock = Clock()
    m = FlagMemory(tmp_path / "flags.db", 1.0, clock)
    m.open()
    m.remember("c1", "D4")
    m._conn.close()                     # the file goes away under the worker (a disk error, a removed volume)
    assert m.refused("c1", "D4")        # read: logged, the flags it knows still refuse
    m.remember("c2", "D8")              # write: logged, kept
    assert m.refused("c2", "D8") and not m.refused("c3", "D4")
    assert "could not share a flag" in caplog.text and "could not read the workers' flags" in caplog.text
    clock.t += 3601
    assert not m.refused("c2", "D8")
