"""The HTTP contract of docs/design.md, through FastAPI's TestClient."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from pond.core.errors import ConfigError, ContractError
from pond.features.tma import pmu_features
from pond.models.bundle import BundlePaths
from pond.serving.app import create_app
from tests.conftest import run_pond
from tests.serving.conftest import bundle_paths, request_of, settings_for


@pytest.fixture()
def requests_(next_day_vms) -> list[dict]:
    return [request_of(r) for r in next_day_vms.head(40).itertuples()]


def test_single_batch_and_predict_cli_agree(client, requests_, small_bundle, tmp_path):
    singles = [client.post("/v1/allocations", json=r).json() for r in requests_]
    batch = client.post("/v1/allocations/batch", json={"requests": requests_}).json()["allocations"]
    assert singles == batch
    pd.DataFrame(requests_).to_csv(tmp_path / "req.csv", index=False)
    argv = ["predict", str(tmp_path / "req.csv"), "--out", str(tmp_path / "alloc.parquet"),
            "--policy", str(small_bundle / "policy.json"), "--li", str(small_bundle / "li"),
            "--um", str(small_bundle / "um"), "--snapshot", str(small_bundle / "features" / "snapshot")]
    assert run_pond(argv) == 0
    offline = pd.read_parquet(tmp_path / "alloc.parquet")
    for k in ("vm_id", "decision", "local_gb", "pool_gb", "znuma_gb", "untouched_fraction", "has_history",
              "customer_history", "model_version"):
        assert offline[k].tolist() == [a[k] for a in batch], k
    assert [None if np.isnan(p) else p for p in offline.p_insensitive] == [a["p_insensitive"] for a in batch]
    a = batch[0]
    assert a["local_gb"] + a["pool_gb"] == a["memory_gb"] and a["policy"]["pdm"] == 5.0
    assert a["znuma_gb"] == (a["pool_gb"] if a["decision"] == "znuma" else 0)


def test_ids_padded_with_spaces_find_what_the_export_holds(client, requests_, small_bundle, tmp_path):
    """Import strips ids, so " cust-7 " in a request is cust-7 of the export: its history and its cluster.
    Kept as sent, it got the unknown customer's answer."""
    padded = [{**r, "customer_id": f" {r['customer_id']}  ", "cluster_id": f"{r['cluster_id']} "} for r in requests_]
    plain = client.post("/v1/allocations/batch", json={"requests": requests_}).json()["allocations"]
    assert any(a["customer_history"] for a in plain)
    assert client.post("/v1/allocations/batch", json={"requests": padded}).json()["allocations"] == plain
    pd.DataFrame(padded).to_csv(tmp_path / "req.csv", index=False)
    assert run_pond(["predict", str(tmp_path / "req.csv"), "--out", str(tmp_path / "alloc.csv"), "--policy",
                 str(small_bundle / "policy.json"), "--li", str(small_bundle / "li"), "--um", str(small_bundle / "um"),
                 "--snapshot", str(small_bundle / "features" / "snapshot")]) == 0
    offline = pd.read_csv(tmp_path / "alloc.csv")
    assert offline.customer_history.tolist() == [a["customer_history"] for a in plain]
    assert offline.pool_gb.tolist() == pytest.approx([a["pool_gb"] for a in plain])


def test_unknown_customer_answer_says_so(client, requests_):
    r = client.post("/v1/allocations", json={**requests_[0], "customer_id": "new-customer"}).json()
    assert r["has_history"] is False and r["customer_history"] is False and r["p_insensitive"] is None


@pytest.mark.parametrize("change, field", [
    ({"memory_gb": 0}, "memory_gb"), ({"memory_gb": -4}, "memory_gb"), ({"vcpus": "four"}, "vcpus"),
    ({"vm_type": ""}, "vm_type"), ({"vm_type": "x" * 129}, "vm_type"), ({"region": None}, "region"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_requests_name_the_field(client, requests_, change, field):
    r = client.post("/v1/allocations", json={**requests_[0], **change})
    assert r.status_code == 422
    assert field in [e["loc"][-1] for e in r.json()["detail"]]


@pytest.mark.parametrize("path", ["/v1/allocations", "/v1/allocations/batch", "/v1/qos"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_only_json_bodies(client, requests_, path, content_type):
    body = json.dumps({"requests": requests_[:1]} if path.endswith("batch") else requests_[0]).encode()
    headers = {"content-type": content_type} if content_type else {}
    r = client.post(path, content=body, headers=headers)
    assert r.status_code == 415 and r.json()["detail"][0]["loc"] == ["header", "content-type"]
    ok = client.post(path, content=body, headers={"content-type": "application/json; charset=utf-8"})
    assert ok.status_code != 415


def test_missing_field_and_bad_json(client, requests_):
    body = dict(requests_[0])
    del body["customer_id"]
    r = client.post("/v1/allocations", json=body)
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "customer_id"]
    r = client.post("/v1/allocations", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422
    r = client.post("/v1/allocations/batch", json={"requests": [requests_[0], {**requests_[1], "memory_gb": 0}]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "requests", 1, "memory_gb"]


@pytest.mark.parametrize("value", ["1e999", "-1e999", "NaN", "Infinity", "-3"])
def test_counters_are_finite_counts_on_every_route(client, requests_, value):
    """One rule, one refusal, on all three routes, located where the bad count is: in a batch, at the request that
    carries it (the second here), whichever JSON parser reads the body (orjson refuses NaN and 1e999 itself)."""
    text = json.dumps({**requests_[0], "counters": {"INST_RETIRED.ANY": 1.0, "CPU_CLK_UNHALTED.THREAD": 7.0}})
    body = text.replace("7.0}", value + "}").encode()
    headers = {"content-type": "application/json"}
    answers = [client.post("/v1/allocations", content=body, headers=headers),
               client.post("/v1/allocations/batch", content=b'{"requests": [' + json.dumps(requests_[1]).encode()
                           + b", " + body + b"]}", headers=headers),
               client.post("/v1/qos", content=json.dumps({"vm_id": "v", "allocation": {"memory_gb": 8, "pool_gb": 2}})
                           .encode()[:-1] + b', "counters": {"CPU_CLK_UNHALTED.THREAD": ' + value.encode() + b"}}",
                           headers=headers)]
    assert [r.status_code for r in answers] == [422, 422, 422]
    details = [r.json()["detail"] for r in answers]
    assert [len(d) for d in details] == [1, 1, 1]
    assert [d[0]["loc"] for d in details] == [["body", "counters"], ["body", "requests", 1, "counters"],
                                              ["body", "counters"]]
    assert all("counts must be finite and >= 0: ['CPU_CLK_UNHALTED.THREAD']" in d[0]["msg"] for d in details)


def test_a_batch_that_is_not_json_is_refused_at_the_body(client, requests_):
    """The second parser reads only what the first refused for its numbers: broken JSON stays a body error."""
    body = b'{"requests": [' + json.dumps(requests_[0]).encode() + b", {]}"
    r = client.post("/v1/allocations/batch", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert [(d["loc"], d["type"]) for d in r.json()["detail"]] == [(["body"], "json_invalid")]


def test_the_batch_envelope_refuses_unknown_fields_as_the_single_route_does(client, requests_):
    r = client.post("/v1/allocations/batch", json={"requests": requests_[:2], "dry_rnu": True})
    assert r.status_code == 422
    assert r.json()["detail"] == [{"loc": ["body", "dry_rnu"], "msg": "Extra inputs are not permitted",
                                   "type": "extra_forbidden"}]
    single = client.post("/v1/allocations", json={**requests_[0], "dry_rnu": True}).json()["detail"][0]
    assert (single["msg"], single["type"]) == ("Extra inputs are not permitted", "extra_forbidden")
    assert client.post("/v1/allocations/batch", json={"requests": requests_[:2]}).status_code == 200


def test_oversized_batch_and_body_get_413(small_bundle, requests_):
    with TestClient(create_app(settings_for(small_bundle, max_batch=5, max_body_mb=0.004))) as c:
        r = c.post("/v1/allocations/batch", json={"requests": requests_[:6]})
        assert r.status_code == 413 and r.json()["detail"][0]["loc"] == ["body", "requests"]
        r = c.post("/v1/allocations/batch", json={"requests": requests_[:40]})   # > 4 kB
        assert r.status_code == 413 and r.json()["detail"][0]["loc"] == ["body"]
        assert c.post("/v1/allocations/batch", json={"requests": requests_[:5]}).status_code == 200


def test_qos(client, small_raw, engine):
    """The monitor's model scores the counters under the allocation the request names, at its served threshold."""
    counters = pd.read_parquet(small_raw / "vm_counters.parquet").head(30)
    events = list(engine.snapshot["events"])
    assert engine.monitor is not None
    share = np.linspace(0.0, 1.0, len(counters))
    expected = engine.monitor.p_exceeds(counters[events], events, share, np.full(len(counters), 2.22))
    for i in range(len(counters)):     # a VM all on the pool is an insensitive call: its own threshold
        threshold = engine.monitor.threshold(2.22, whole=share[i] == 1.0)
        row = counters.iloc[i]
        body = {"vm_id": row.vm_id, "counters": {e: float(row[e]) for e in events},
                "allocation": {"memory_gb": 32.0, "pool_gb": 32.0 * share[i], "latency_ratio": 2.22}}
        r = client.post("/v1/qos", json=body).json()
        assert r["p_exceeds_pdm"] == pytest.approx(expected[i], abs=1e-6)
        assert r["exceeds_pdm"] == (expected[i] >= threshold) and r["threshold"] == threshold
        assert r["monitor"] == "pool_counters"
        assert r["action"] == ("reconfigure_local" if r["exceeds_pdm"] and share[i] > 0 else "none")
    good = {e: float(counters.iloc[0][e]) for e in events}
    alloc = {"memory_gb": 16.0, "pool_gb": 8.0}
    r = client.post("/v1/qos", json={"vm_id": "v", "counters": good})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "allocation"]
    r = client.post("/v1/qos", json={"vm_id": "v", "counters": good, "allocation": {"memory_gb": 16.0, "pool_gb": 20}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "allocation"]
    assert "pool_gb (20) exceeds memory_gb (16)" in r.json()["detail"][0]["msg"]
    r = client.post("/v1/qos", json={"vm_id": "v", "counters": good, "allocation": {"pool_gb": 8.0}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "allocation", "memory_gb"]
    r = client.post("/v1/qos", json={"vm_id": "v", "counters": good, "allocation": alloc})
    assert r.status_code == 200 and r.json()["threshold"] == engine.monitor.threshold(engine.policy.latency_ratio)
    r = client.post("/v1/qos", json={"vm_id": "v", "allocation": alloc,
                                     "counters": {k: v for k, v in good.items() if k != "CPU_CLK_UNHALTED.THREAD"}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "counters"]
    assert "CPU_CLK_UNHALTED.THREAD" in r.json()["detail"][0]["msg"]
    r = client.post("/v1/qos", json={"vm_id": "v", "allocation": alloc, "counters": {**good, "NOT_AN_EVENT": 1.0}})
    assert r.status_code == 422 and "NOT_AN_EVENT" in r.json()["detail"][0]["msg"]
    r = client.post("/v1/qos", json={"vm_id": "v", "allocation": alloc, "counters": {**good, "INST_RETIRED.ANY": -1}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "counters"]
    # the monitor's model reads the events of train_monitor.events alone: a hypervisor that counts only those is
    # answered the same; one that misses any of them is told which
    reads = {e: good[e] for e in engine.monitor.events}
    assert len(reads) == 12 and client.post("/v1/qos", json={"vm_id": "v", "allocation": alloc, "counters": reads}
                                            ).json() == client.post("/v1/qos", json={"vm_id": "v", "allocation": alloc,
                                                                                      "counters": good}).json()
    r = client.post("/v1/qos", json={"vm_id": "v", "allocation": alloc,
                                     "counters": {k: v for k, v in reads.items() if k != "UNC_M_CAS_COUNT.RD"}})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "counters"]
    assert "['UNC_M_CAS_COUNT.RD'] are required by the QoS monitor's model" in r.json()["detail"][0]["msg"]
    with pytest.raises(ContractError, match="table 'vm_pool_counters', column 'UNC_M_CAS_COUNT.RD'"):
        engine.monitor.p_exceeds(counters[events].drop(columns="UNC_M_CAS_COUNT.RD"), events, share, share,
                                 table="vm_pool_counters")


def test_qos_without_a_monitor_model_scores_with_the_li_model(small_bundle, small_raw):
    """A bundle whose lab had no spill runs: the LI model scores the counters, at POND_QOS_THRESHOLD."""
    from pond.serving.engine import Engine

    paths = bundle_paths(small_bundle)
    eng = Engine.load(BundlePaths(paths.policy, paths.li_dir, paths.um_dir, paths.snapshot_dir), qos_threshold=0.4)
    counters = pd.read_parquet(small_raw / "vm_counters.parquet").head(5)
    events = list(eng.snapshot["events"])
    expected = 1 - eng.models.p_insensitive(pmu_features(counters[events], events))
    for i in range(len(counters)):
        v = eng.qos({e: float(counters.iloc[i][e]) for e in events}, 16.0, 4.0)
        assert v.monitor == "li_model" and v.threshold == 0.4 and v.p == pytest.approx(expected[i], abs=1e-6)
        assert v.exceeds == (expected[i] >= 0.4)
    assert eng.info["monitor_sha256"] is None


def test_health_ready_model_metrics(client, requests_, engine):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json() == {"ready": True, "model_version": engine.version}
    info = client.get("/v1/model").json()
    assert info["version"] == engine.version and info["li_sha256"] == engine.policy.li.sha256
    assert info["policy"]["li"]["threshold"] == engine.policy.li.threshold
    new = {**requests_[0], "memory_gb": 123.0}   # a size no VM had: a shape the snapshot cannot have prefilled
    first, again = (client.post("/v1/allocations", json=new).json() for _ in range(2))
    assert first == again
    client.post("/v1/allocations", json={**requests_[0], "memory_gb": -1})
    text = client.get("/metrics").text
    assert 'pond_requests_total{endpoint="/v1/allocations",status="200"} 2.0' in text
    assert 'pond_requests_total{endpoint="/v1/allocations",status="422"} 1.0' in text
    assert 'pond_um_cache_total{outcome="miss"} 1.0' in text and 'pond_um_cache_total{outcome="hit"} 1.0' in text
    for stage in ("enrich", "infer", "decide"):   # the repeat had its shape's answer: the engine ran once
        assert f'pond_stage_seconds_count{{stage="{stage}"}} 1.0' in text
    assert "pond_request_seconds_bucket" in text and "pond_ready 1.0" in text
    assert client.get("/openapi.json").json()["paths"]["/v1/allocations"]["post"]


def test_not_ready_without_a_bundle(tmp_path, requests_):
    settings = settings_for(tmp_path)   # nothing there
    with TestClient(create_app(settings)) as c:
        assert c.get("/healthz").status_code == 200
        r = c.get("/readyz")
        assert r.status_code == 503 and "not found" in r.json()["reason"]
        assert c.post("/v1/allocations", json=requests_[0]).status_code == 503


TOKEN = "0123456789abcdef-s3cret"


@pytest.mark.parametrize("token", [None, "", "short", " " * 20, "0123456789abcdef\n"])
def test_no_real_token_no_service_off_loopback(small_bundle, token):
    with pytest.raises(ConfigError, match="POND_API_TOKEN"):
        create_app(settings_for(small_bundle, host="0.0.0.0", api_token=token))


def test_bearer_token(small_bundle, requests_):
    with TestClient(create_app(settings_for(small_bundle, api_token=TOKEN, require_auth=True))) as c:
        assert c.post("/v1/allocations", json=requests_[0]).status_code == 401
        for bad in ("Bearer nope", "Bearer ", "", f"Basic {TOKEN}"):
            assert c.post("/v1/allocations", json=requests_[0], headers={"Authorization": bad}).status_code == 401
        ok = {"Authorization": f"Bearer {TOKEN}"}
        assert c.post("/v1/allocations", json=requests_[0], headers=ok).status_code == 200
        assert c.get("/metrics").status_code == 401 and c.get("/metrics", headers=ok).status_code == 200
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200
        # RFC 7235 §2.1: the scheme is case-insensitive, on the fast path (one VM) and the app's edge alike
        for scheme in ("bearer", "BEARER", "BeArEr"):
            h = {"Authorization": f"{scheme} {TOKEN}"}
            assert c.post("/v1/allocations", json=requests_[0], headers=h).status_code == 200, scheme
            assert c.post("/v1/allocations/batch", json={"requests": requests_[:2]}, headers=h).status_code == 200
            assert c.get("/metrics", headers=h).status_code == 200
        for bad in (f"bearer {TOKEN}x", f"bearer{TOKEN}", f"bearer  {TOKEN[:-1]}"):
            assert c.post("/v1/allocations", json=requests_[0], headers={"Authorization": bad}).status_code == 401


def test_the_fast_path_and_the_edge_ask_one_access_rule():
    """The access rule is one object (``serving.access``) that both layers hold, and nothing else compares a token:
    with a copy in each, a change to one left the other answering 200 under the old rule."""
    import inspect

    from pond.serving import hot, middleware
    from pond.serving.access import Access

    for module in (hot, middleware):
        text = inspect.getsource(module)
        assert "Access(token)" in text and "compare_digest" not in text and "b\"Bearer " not in text
    a = Access(b"t" * 16)
    assert a.allows(b"Bearer " + b"t" * 16) and a.allows(b"bearer " + b"t" * 16) and not a.allows(None)
    assert not a.allows(b"Basic " + b"t" * 16) and Access(None).allows(None)
    assert Access.protects("/v1/qos") and Access.protects("/metrics") and not Access.protects("/readyz")


def test_tampered_model_is_refused(small_bundle, tmp_path):
    import shutil
    for d in ("li", "um"):
        shutil.copytree(small_bundle / d, tmp_path / d)
    shutil.copytree(small_bundle / "features" / "snapshot", tmp_path / "features" / "snapshot")
    policy = json.loads((small_bundle / "policy.json").read_text())
    policy["um"]["sha256"] = "0" * 64
    (tmp_path / "policy.json").write_text(json.dumps(policy))
    with TestClient(create_app(settings_for(tmp_path))) as c:
        r = c.get("/readyz")
        assert r.status_code == 503 and "sha256" in r.json()["reason"]


def test_work_per_request_is_bounded_before_validation(small_bundle, requests_):
    """Oversized or junk bodies are refused by size or by a byte count, never by building one
    validation error per element; a 422 lists at most 20 problems, located in the right request."""
    with TestClient(create_app(settings_for(small_bundle, max_batch=600))) as c:
        big = {**requests_[0], "vm_id": "v" * 70_000}
        assert c.post("/v1/allocations", json=big).status_code == 413           # one VM: 64 KB at most
        many = {**requests_[0], "counters": {f"EVENT_{i}": 1.0 for i in range(513)}}
        r = c.post("/v1/allocations", json=many)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "counters"]
        r = c.post("/v1/allocations/batch", json={"requests": requests_[:1] * 601})
        assert r.status_code == 413 and "at most 600" in r.json()["detail"][0]["msg"]
        junk = b'{"requests": [' + b"1," * 300_000 + b"1]}"
        r = c.post("/v1/allocations/batch", content=junk, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "more values than its requests can" in r.json()["detail"][0]["msg"]
        bad = requests_[:1] * 300 + [{**requests_[0], "memory_gb": -1}] * 300
        r = c.post("/v1/allocations/batch", json={"requests": bad})
        assert r.status_code == 422
        detail = r.json()["detail"]
        assert len(detail) == 20 and detail[0]["loc"] == ["body", "requests", 300, "memory_gb"]
        ok = c.post("/v1/allocations/batch", json={"requests": requests_[:1] * 600})
        assert ok.status_code == 200 and len(ok.json()["allocations"]) == 600
        # braces and commas inside strings are no structure: braced GUIDs and comma-laden ids pass
        odd = {**requests_[0], "customer_id": "{" + "," * 250 + "}", "vm_id": "{{{" + "," * 250 + "}}}",
               "cluster_id": "," * 256}
        ok = c.post("/v1/allocations/batch", json={"requests": [odd] * 600})
        assert ok.status_code == 200 and ok.json()["allocations"][0]["customer_history"] is False
        for body in ({"requests": "all"}, [1, 2]):
            assert c.post("/v1/allocations/batch", json=body).status_code == 422


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_nothing_from_outside(client, page):
    """An air-gapped network has no CDN: every script, style and icon a docs page names is served here."""
    import re

    r = client.get(page)
    assert r.status_code == 200 and "text/html" in r.headers["content-type"]
    assert "://" not in r.text, re.findall(r"\S*://\S*", r.text)
    assets = re.findall(r'(?:src|href)="([^"]+)"', r.text) + re.findall(r"(?:url|spec-url): ?'([^']+)'", r.text)
    assert any(a.endswith(".js") for a in assets)
    for asset in assets:
        got = client.get(asset)
        assert got.status_code == 200 and len(got.content) > 0, asset
