"""What the MLflow UI shows of two nights, read through the REST API a browser uses: the experiment opens on its
runs, each night is one parent run carrying its headline figures with the stages nested under it, each version
links to its night and carries a request schema and an example, and `pond compare` prints the nights' figures."""

from __future__ import annotations

import json

import httpx
import pandas as pd
import pytest
import yaml

from tests.conftest import run_pond, small_params
from tests.model.test_registry import _night
from tests.serving.test_registry_server import mlflow_server  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow

HEADLINE = ("li_at_fp2", "um_at_op4", "realized_pool", "realized_mispredictions", "dram_saved", "dram_saved_lo",
            "dram_saved_hi")


def _simulated(night_metrics_dir, served: str, ratio: float, saving: float) -> None:
    """A replay's answer for the served policy (what `simulate` writes), so the night run has a DRAM figure."""
    row = {"recommended": {"savings": saving, "savings_interval": [saving - 0.03, saving + 0.03]}}
    (night_metrics_dir / "simulate.json").write_text(json.dumps({"policies": {f"{served}_r{ratio:g}": row}}))


def _api(uri: str, path: str, **params) -> dict:
    r = httpx.get(f"{uri}/api/2.0/mlflow/{path}", params=params, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def _search(uri: str, experiment_id: str, filter_string: str) -> list[dict]:
    r = httpx.post(f"{uri}/api/2.0/mlflow/runs/search", timeout=30,
                   json={"experiment_ids": [experiment_id], "filter": filter_string, "max_results": 100})
    assert r.status_code == 200, r.text
    return r.json().get("runs", [])


def _metrics(run: dict) -> dict[str, float]:
    return {m["key"]: m["value"] for m in run["data"].get("metrics", [])}


def _tags(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}


def test_two_nights_in_the_ui_compare_by_their_headline_figures(mlflow_server, small_bundle, small_raw,  # noqa: F811
                                                                 tmp_path, monkeypatch, capsys):
    from pond.core.tracking import start_run

    uri = mlflow_server
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(small_params()))
    store = tmp_path / "nights"
    policy = json.loads((small_bundle / "policy.json").read_text())
    savings = {}
    for name, without_li in (("night1", False), ("night2", True)):
        argv = _night(small_bundle, small_raw, store, name, without_li=without_li)
        savings[name] = 0.05 if name == "night1" else 0.02
        _simulated(store / name / "metrics", "combined", policy["latency_ratio"], savings[name])
        with start_run("train_um", {"alphas": [0.5]}) as _:     # a stage that runs before register, same night
            pass
        assert run_pond(["--params", str(params), *argv]) == 0

    # the experiment is one of model training: the UI opens on its runs, not on the GenAI overview
    exp = _api(uri, "experiments/get-by-name", experiment_name="pond")["experiment"]
    assert {t["key"]: t["value"] for t in exp["tags"]}["mlflow.experimentKind"] == "custom_model_development"

    nights = _search(uri, exp["experiment_id"], "tags.`pond.kind` = 'night'")
    assert len(nights) == 2 and {n["info"]["status"] for n in nights} == {"FINISHED"}
    assert {n["info"]["run_name"] for n in nights} == {f"night {policy['as_of']}"}
    by_version = {_tags(n)["registered_version"]: n for n in nights}
    assert sorted(by_version) == ["1", "2"]
    for version, night in by_version.items():
        children = _search(uri, exp["experiment_id"], f"tags.`mlflow.parentRunId` = '{night['info']['run_id']}'")
        assert sorted(_tags(c)["stage"] for c in children) == ["register", "train_um"]
        figures = _metrics(night)
        assert set(HEADLINE) <= set(figures) and figures["promoted"] == (1.0 if version == "1" else 0.0)
        assert figures["dram_saved"] == pytest.approx(savings[f"night{version}"])
        night_params = {p["key"]: p["value"] for p in night["data"]["params"]}
        assert night_params["served_policy"] == "combined" and "alphas" not in night_params
        assert _tags(night)["gate.decision"] == ("champion" if version == "1" else "challenger")

        # the version links to its night and shows the request schema and an example
        mv = _api(uri, "model-versions/get", name="pond-znuma", version=version)["model_version"]
        assert mv["run_id"] == night["info"]["run_id"]
        r = httpx.get(f"{uri}/model-versions/get-artifact", params={"path": "MLmodel", "name": "pond-znuma",
                                                                     "version": version}, timeout=30)
        assert r.status_code == 200, r.text
        mlmodel = yaml.safe_load(r.text)
        inputs = [c["name"] for c in json.loads(mlmodel["signature"]["inputs"])]
        outputs = [c["name"] for c in json.loads(mlmodel["signature"]["outputs"])]
        assert inputs[:3] == ["vm_id", "customer_id", "vm_type"] and {"local_gb", "pool_gb"} <= set(outputs)
        assert mlmodel["saved_input_example_info"]["artifact_path"] == "input_example.json"

    # LI off in night 2: less on the pool; `pond compare` prints the figures the two night runs carry
    assert _metrics(by_version["2"])["realized_pool"] < _metrics(by_version["1"])["realized_pool"]
    capsys.readouterr()
    assert run_pond(["--params", str(params), "compare", "1", "2", "--out", str(tmp_path / "cmp")]) == 0
    table = pd.read_csv(tmp_path / "cmp" / "compare.csv", index_col=0)
    for version in ("1", "2"):
        shown = table[f"pond-znuma/v{version}"]
        for key in HEADLINE:
            assert float(shown[key]) == pytest.approx(_metrics(by_version[version])[key], rel=1e-9), key

    # `pond ui` (a server: links only) links the runs, the two nights side by side and the champion, each in the
    # model-training mode (MLflow 3's UI otherwise opens on the GenAI overview)
    capsys.readouterr()
    assert run_pond(["--params", str(params), "ui"]) == 0
    links = [line.split()[-1] for line in capsys.readouterr().out.splitlines() if "://" in line]
    text = "\n".join(links)
    assert len(links) == 3 and all(link.startswith(f"{uri}/#/") and link.endswith("workflowType=machine_learning")
                                   for link in links), text
    assert f"experiments/{exp['experiment_id']}/runs" in text and "models/pond-znuma/versions/1?" in text
    assert all(n["info"]["run_id"] in text for n in nights)

