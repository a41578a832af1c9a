"""Every refusal the service documents, byte for byte as the service gave it before the scheduler's fast path
(the fast path): ``refusals.json`` was recorded from the code of commit cd86b8b, whose single route validated every
body with pydantic inside FastAPI's stack. A refusal does not depend on the bundle, so any bundle records it."""

from __future__ import annotations

import json
from pathlib import Path

from fastapi.testclient import TestClient

from pond.serving.app import create_app
from tests.serving.conftest import settings_for

RECORDED = Path(__file__).with_name("refusals.json")
TOKEN = "0123456789abcdef-s3cret"
VM = {"vm_id": "vm-1", "customer_id": "cust-1", "vm_type": "Standard_D4s_v3", "vcpus": 4, "memory_gb": 16.0,
      "os": "linux", "region": "eastus", "cluster_id": "c1"}
JSON = {"content-type": "application/json"}
SINGLE, BATCH = "/v1/allocations", "/v1/allocations/batch"


def _vm(**change) -> bytes:
    return json.dumps({k: v for k, v in {**VM, **change}.items() if v is not ...}).encode()


# name: (path, headers, body)
CASES: dict[str, tuple[str, dict, bytes]] = {
    "memory zero": (SINGLE, JSON, _vm(memory_gb=0)),
    "memory negative": (SINGLE, JSON, _vm(memory_gb=-4)),
    "memory true": (SINGLE, JSON, _vm(memory_gb=True)),
    "memory past the limit": (SINGLE, JSON, _vm(memory_gb=65537)),
    "memory infinite": (SINGLE, JSON, _vm(memory_gb=...)[:-1] + b', "memory_gb": 1e999}'),
    "vcpus a word": (SINGLE, JSON, _vm(vcpus="four")),
    "vcpus fractional": (SINGLE, JSON, _vm(vcpus=4.5)),
    "vcpus zero": (SINGLE, JSON, _vm(vcpus=0)),
    "vcpus true": (SINGLE, JSON, _vm(vcpus=True)),
    "vm_type empty": (SINGLE, JSON, _vm(vm_type="")),
    "vm_type spaces": (SINGLE, JSON, _vm(vm_type="   ")),
    "vm_type too long": (SINGLE, JSON, _vm(vm_type="x" * 129)),
    "customer spaces only": (SINGLE, JSON, _vm(customer_id=" \t ")),
    "region null": (SINGLE, JSON, _vm(region=None)),
    "cluster empty": (SINGLE, JSON, _vm(cluster_id="  ")),
    "cluster a number": (SINGLE, JSON, _vm(cluster_id=5)),
    "unknown field": (SINGLE, JSON, _vm(surprise=1)),
    "missing field": (SINGLE, JSON, _vm(customer_id=...)),
    "counters negative": (SINGLE, JSON, _vm(counters={"INST_RETIRED.ANY": -3})),
    "counters not a map": (SINGLE, JSON, _vm(counters=[1, 2])),
    "not json": (SINGLE, JSON, b"{not json"),
    "a list": (SINGLE, JSON, b"[" + _vm() + b"]"),
    "empty body": (SINGLE, JSON, b""),
    "text/plain": (SINGLE, {"content-type": "text/plain"}, _vm()),
    "no content type": (SINGLE, {}, _vm()),
    "single body too large": (SINGLE, JSON, _vm(vm_id="x" * 70_000)),
    "batch not a list": (BATCH, JSON, b'{"requests": {}}'),
    "batch unknown field": (BATCH, JSON, b'{"requests": [], "dry_rnu": true}'),
    "batch bad item": (BATCH, JSON, b'{"requests": [' + _vm() + b", " + _vm(memory_gb=0) + b"]}"),
    "batch too many": (BATCH, JSON, json.dumps({"requests": [VM] * 10_001}).encode()),
}


def refusals(client: TestClient, cases: dict[str, tuple[str, dict, bytes]] = CASES) -> dict[str, list]:
    """[status, body text] per case."""
    out = {}
    for name, (path, headers, body) in cases.items():
        r = client.post(path, content=body, headers=headers)
        out[name] = [r.status_code, r.text]
    return out


def record(settings_kw: dict) -> dict[str, dict[str, list]]:
    """What ``refusals.json`` holds, from the service built by ``settings_kw`` (and, for the token and the
    not-ready cases, the same service with a token and one with no bundle)."""
    from pond.serving.settings import Settings

    with TestClient(create_app(Settings(**settings_kw, reload_interval_s=0))) as c:
        out = {"open": refusals(c)}
    with TestClient(create_app(Settings(**settings_kw, reload_interval_s=0, api_token=TOKEN,
                                        require_auth=True))) as c:
        out["token"] = refusals(c, {k: CASES[k] for k in ("memory zero", "not json")}) | refusals(
            c, {"wrong token": (SINGLE, {**JSON, "authorization": "Bearer nope"}, _vm())})
    missing = {k: Path("/nonexistent") / k for k in ("policy", "li_dir", "um_dir", "snapshot_dir")}
    with TestClient(create_app(Settings(**missing, reload_interval_s=0))) as c:
        out["not ready"] = refusals(c, {"valid": (SINGLE, JSON, _vm())})
    return out


def test_every_documented_refusal_is_the_recorded_one(small_bundle):
    s = settings_for(small_bundle)
    got = record({"policy": s.policy, "li_dir": s.li_dir, "um_dir": s.um_dir, "snapshot_dir": s.snapshot_dir})
    recorded = json.loads(RECORDED.read_text())
    assert set(got) == set(recorded)
    for group, answers in recorded.items():
        assert got[group].keys() == answers.keys(), group
        for name, answer in answers.items():
            assert got[group][name] == answer, (group, name)
    assert all(status >= 400 for group in got.values() for status, _ in group.values())
