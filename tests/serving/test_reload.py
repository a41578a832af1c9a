"""Hot reload: a new bundle is loaded off the request path and swapped; no request fails or mixes."""

from __future__ import annotations

import json
import shutil
import threading
import time

from fastapi.testclient import TestClient

from pond.serving.app import create_app
from pond.serving.engine import Engine, version_of
from pond.telemetry.atomic import write_atomic
from tests.serving.conftest import bundle_paths, request_of, settings_for


def test_swap_under_load(small_bundle, tmp_path, next_day_vms):
    for d in ("li", "um"):
        shutil.copytree(small_bundle / d, tmp_path / d)
    shutil.copytree(small_bundle / "features" / "snapshot", tmp_path / "features" / "snapshot")
    policy_a = json.loads((small_bundle / "policy.json").read_text())
    policy_b = {**policy_a, "li": {**policy_a["li"], "threshold": 0.0},   # every VM with history -> pool_only
                "serve": {"policy": "combined", "pool_cap": None}}
    texts = [json.dumps(policy_a), json.dumps(policy_b)]
    reqs = [request_of(r) for r in next_day_vms.head(20).itertuples()]
    expected = {}
    for text in texts:   # what each version must answer, computed outside the service
        (tmp_path / "policy.json").write_text(text)
        eng = Engine.load(bundle_paths(tmp_path))
        cols = {k: [r[k] for r in reqs] for k in reqs[0]}
        expected[eng.version] = eng.allocate(cols)["pool_gb"].tolist()
    assert len(expected) == 2 and expected[next(iter(expected))] != list(expected.values())[1]
    (tmp_path / "policy.json").write_text(texts[0])

    seen, failures, stop = {v: 0 for v in expected}, [], threading.Event()
    with TestClient(create_app(settings_for(tmp_path, reload_interval_s=0.05))) as client:
        def hammer() -> None:
            while not stop.is_set():
                r = client.post("/v1/allocations/batch", json={"requests": reqs})
                if r.status_code != 200:
                    failures.append(r.status_code)
                    continue
                allocs = r.json()["allocations"]
                versions = {a["model_version"] for a in allocs}
                if len(versions) != 1 or [a["pool_gb"] for a in allocs] != expected[versions.pop()]:
                    failures.append("mixed")
                    continue
                seen[allocs[0]["model_version"]] += 1

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for i in range(8):             # four swaps each way
            time.sleep(0.3)
            write_atomic(tmp_path / "policy.json", texts[(i + 1) % 2])
        time.sleep(0.3)
        stop.set()
        for t in threads:
            t.join()
        reloads = client.get("/metrics").text
    assert failures == []
    assert all(n > 0 for n in seen.values()), seen
    assert 'pond_reloads_total{outcome="loaded"}' in reloads


def test_version_names_the_policy_it_decides_with(small_bundle, tmp_path, monkeypatch):
    """The pipeline replaces policy.json while the service loads it: the engine's version is the hash of the
    bytes it parsed, not of the file as it is a moment later (that mismatch once labelled policy A's
    decisions with policy B's version under load)."""
    import pond.serving.engine as engine_module

    for d in ("li", "um"):
        shutil.copytree(small_bundle / d, tmp_path / d)
    shutil.copytree(small_bundle / "features" / "snapshot", tmp_path / "features" / "snapshot")
    a = (small_bundle / "policy.json").read_bytes()
    b = json.dumps({**json.loads(a), "li": {**json.loads(a)["li"], "threshold": 0.0},
                    "serve": {"policy": "combined", "pool_cap": None}}).encode()
    write_atomic(tmp_path / "policy.json", a)
    verify = engine_module.verify_snapshot

    def replaced_meanwhile(snapshot_dir):
        write_atomic(tmp_path / "policy.json", b)
        return verify(snapshot_dir)

    monkeypatch.setattr(engine_module, "verify_snapshot", replaced_meanwhile)
    engine = Engine.load(bundle_paths(tmp_path))
    manifest = (tmp_path / "features" / "snapshot" / "manifest.json").read_bytes()
    assert engine.policy.li.threshold == json.loads(a)["li"]["threshold"] != 0.0
    assert engine.version == version_of(a, manifest) != version_of(b, manifest)


def test_service_follows_the_registry_alias(small_bundle, tmp_path, next_day_vms):
    """`champion` moves in MLflow -> the polling service serves that version, verified and warmed."""
    import mlflow
    from mlflow import MlflowClient

    from pond.models.bundle import BundlePaths, assemble

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("t")
    client = MlflowClient()
    client.create_registered_model("pond-znuma")
    paths = bundle_paths(small_bundle)
    for threshold in (None, 0.0):
        d = tmp_path / f"bundle-{threshold}"
        src = paths
        if threshold is not None:   # a second night: same models, another policy
            policy = json.loads(paths.policy.read_text())
            policy["li"]["threshold"] = threshold
            (tmp_path / "p.json").write_text(json.dumps(policy))
            src = BundlePaths(tmp_path / "p.json", paths.li_dir, paths.um_dir, paths.snapshot_dir)
        assemble(d, src, {}, next_day_vms, {})
        with mlflow.start_run() as run:
            mlflow.log_artifacts(str(d), artifact_path="bundle")
        client.create_model_version("pond-znuma", f"{run.info.artifact_uri}/bundle", run.info.run_id)
    client.set_registered_model_alias("pond-znuma", "champion", 1)
    settings = settings_for(tmp_path / "nothing", registry_model="pond-znuma", mlflow_tracking_uri=uri)
    req = request_of(next(next_day_vms.itertuples()))
    with TestClient(create_app(settings)) as client_:
        assert client_.get("/readyz").json()["model_version"] == "pond-znuma/v1"
        client.set_registered_model_alias("pond-znuma", "champion", 2)
        assert client_.app.state.service.holder.refresh()            # what the poller does every interval
        assert client_.post("/v1/allocations", json=req).json()["model_version"] == "pond-znuma/v2"
        assert not client_.app.state.service.holder.refresh()        # unchanged alias: nothing reloaded
