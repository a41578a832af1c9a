"""A fleet we did not make: other clouds' size names, no workload_id column, workloads the lab never
measured. It goes through `pond import`, every stage of `dvc repro`, `pond predict` and both HTTP
routes, and every request gets a decision."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fastapi.testclient import TestClient

from pond.serving.app import create_app
from pond.telemetry.io import read_tables
from tests.conftest import SMALL_GRID, run_pond, small_params, stage_argv
from tests.serving.conftest import settings_for

pytestmark = pytest.mark.slow

FOREIGN_NAMES = ["Standard_B2s", "Standard_A1", "Standard_E64-32s_v3", "Standard_NC24ads_A100_v4", "Standard_DC2s",
                 "m5.xlarge", "n2-standard-8", "c6gn.16xlarge", "e2-medium", "bx2-4x16", "VM.Standard.E4.Flex",
                 "custom size #7"]

FREE_NAMES = {
    "region": ["日本東部 ", "us/east ", "eu-west,"],
    "os": ["Windows Server 2022 Datacenter ", "Ubuntu 22.04, LTS "],
    "cluster_id": ["eu/west 1 · c", "../c", "c%2F"],
    "customer_id": ['acme, inc. "blue" #', "ÖBB/", "a\\\\b "],
}


LOOKALIKE_IDS = ["001", "01", "1", "0001", "1e5", "1E5", "1.0", "2026-01-05", "NA", "None", "007", "7"]


@pytest.fixture(scope="module")
def foreign(small_tables, small_reports_raw, tmp_path_factory):
    """The small fleet exported as a provider would: CSV, other names, no lab link, a third of the lab unmeasured,
    and slowdowns measured on a third of its customers' VMs (the same VMs: `small_reports_raw`)."""
    src = tmp_path_factory.mktemp("export")
    vms = small_tables["vms"].drop(columns=["workload_id"])
    types = sorted(vms.vm_type.unique())
    vms["vm_type"] = vms.vm_type.map({t: FOREIGN_NAMES[i % len(FOREIGN_NAMES)] for i, t in enumerate(types)})
    # names the contract leaves free, as a provider's systems write them: spaces, slashes, commas, quotes, non-ASCII
    for col, names in FREE_NAMES.items():
        values = sorted(vms[col].unique())
        vms[col] = vms[col].map({v: f"{names[i % len(names)]}{i}" for i, v in enumerate(values)})
    # and ids a type-guessing reader turns into others: 001, 01 and 1 are three customers
    values = sorted(vms.customer_id.unique())[1::2]
    vms["customer_id"] = vms.customer_id.replace({v: LOOKALIKE_IDS[i] if i < len(LOOKALIKE_IDS) else f"{i:04d}"
                                                  for i, v in enumerate(values)})
    workloads = small_tables["workloads"]
    kept = workloads.workload_id.iloc[::3].tolist() + workloads.workload_id.iloc[1::3].tolist()
    workloads = workloads[workloads.workload_id.isin(kept)]
    slowdowns = small_tables["slowdowns"][small_tables["slowdowns"].workload_id.isin(kept)]
    reports = pd.read_parquet(small_reports_raw / "vm_slowdowns.parquet")
    # ids the provider reused: a full-pool run measured the day before a VM of that id was created, on as_of (which
    # optimize reads) and on the day evaluate judges; it is the earlier VM's, never the new one's
    as_of = pd.Timestamp(small_params()["base"]["as_of"])
    days = [as_of.date(), (as_of + pd.Timedelta(days=1)).date()]
    unmeasured = vms[~vms.vm_id.isin(reports.vm_id) & vms.created_at.dt.date.isin(days)]
    reused = unmeasured.groupby(unmeasured.created_at.dt.date).head(20)
    reports = pd.concat([reports, pd.DataFrame({
        "vm_id": reused.vm_id.to_numpy(), "latency_ratio": 1.82, "spilled_pct": 100.0, "slowdown_pct": 80.0,
        "measured_at": (reused.created_at - pd.Timedelta(days=1)).to_numpy()})], ignore_index=True)
    for name, df in (("vms", vms), ("workloads", workloads), ("slowdowns", slowdowns),
                     ("vm_counters", small_tables["vm_counters"]), ("vm_slowdowns", reports)):
        df.to_csv(src / f"{name}.csv", index=False)
    return src


def test_foreign_fleet_is_served_end_to_end(foreign, small_tables, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    raw, wd = tmp_path / "raw", tmp_path
    assert run_pond(["import", str(foreign), "--out", str(raw)]) == 0
    imported = read_tables(raw)["vms"]
    assert imported.workload_id.isna().all() and set(imported.vm_type) <= set(FOREIGN_NAMES)
    for col, names in FREE_NAMES.items():        # kept as written, every one of them
        values = imported[col][~imported[col].isin(LOOKALIKE_IDS) & ~imported[col].str.fullmatch(r"\d{4}")]
        assert {v.rstrip("0123456789") for v in values} == set(names), col
    exported = pd.read_csv(foreign / "vms.csv", dtype=str, keep_default_na=False)
    assert imported.customer_id.tolist() == exported.customer_id.tolist()
    assert set(LOOKALIKE_IDS) <= set(imported.customer_id)

    params = small_params()
    params["simulate"].update(SMALL_GRID)
    (wd / "params.yaml").write_text(yaml.safe_dump(params))
    p = ["--params", str(wd / "params.yaml")]
    stages = stage_argv(wd, raw)     # the stages of dvc.yaml after generate, in its order, on the imported tables
    for argv in stages:
        assert run_pond(p + argv) == 0, argv[0]
    out = capsys.readouterr().out

    features = json.loads((wd / "m/features.json").read_text())
    named = sum(1 for t in imported.vm_type if t not in ("bx2-4x16", "VM.Standard.E4.Flex", "custom size #7"))
    assert features["vm_type_parsed_share"] == pytest.approx(named / len(imported))
    assert "have a vm_type in a known naming scheme" in out
    vocab = json.loads((wd / "um" / "manifest.json").read_text())["vocabulary"]
    assert {"azure/B", "azure/NC", "aws/m", "gcp/n"} <= set(vocab["family"])   # the UM model learned from them
    evaluation = json.loads((wd / "m/evaluate.json").read_text())
    assert "have no lab workload" in out and evaluation["truth_source"] == "lab+vm_slowdowns"
    # no VM names a workload: the measured ones are judged by their own slowdowns, the others by the estimate
    day = (pd.Timestamp(small_params()["base"]["as_of"]) + pd.Timedelta(days=1)).date()
    reports = read_tables(raw, ["vm_slowdowns"])["vm_slowdowns"].merge(imported[["vm_id", "created_at"]], on="vm_id")
    own = (reports.latency_ratio == 1.82) & (reports.spilled_pct == 100) & (reports.measured_at >= reports.created_at)
    nxt = imported[imported.created_at.dt.date == day]
    judged = nxt.vm_id.isin(set(reports.vm_id[own])).mean()
    assert 0 < evaluation["combined"]["lab_truth_share"] == pytest.approx(judged)
    used = json.loads((wd / "policy.json").read_text())["fleet_reports"]
    assert used["rows_measured_before_created"] == 20      # the reused ids of VMs created on as_of
    assert "20 rows measured before their VM was created" in out   # optimize says so in the nightly log

    requests = nxt[["vm_id", "customer_id", "vm_type", "vcpus", "memory_gb", "os", "region", "cluster_id"]]
    requests = pd.concat([requests, requests.head(3).assign(vm_id=lambda d: d.vm_id + "-new", customer_id="never-seen",
                                                            vm_type="t9g.huge", region="moon-1", os="plan9")])
    requests.to_csv(tmp_path / "requests.csv", index=False)
    assert run_pond(["predict", str(tmp_path / "requests.csv"), "--out", str(tmp_path / "alloc.parquet"),
                 "--policy", str(wd / "policy.json"), "--li", str(wd / "li"), "--um", str(wd / "um"),
                 "--snapshot", str(wd / "features" / "snapshot")]) == 0
    offline = pd.read_parquet(tmp_path / "alloc.parquet")
    assert len(offline) == len(requests) > 50 and offline.decision.notna().all()
    assert (offline.local_gb + offline.pool_gb == offline.memory_gb).all()

    body = [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in json.loads(requests.to_json(orient="records"))]
    with TestClient(create_app(settings_for(wd))) as client:
        singles = [client.post("/v1/allocations", json=r) for r in body]
        batch = client.post("/v1/allocations/batch", json={"requests": body})
    assert [r.status_code for r in singles] == [200] * len(body) and batch.status_code == 200
    assert [r.json() for r in singles] == batch.json()["allocations"]
    assert [a["decision"] for a in batch.json()["allocations"]] == offline.decision.tolist()
    unknown = batch.json()["allocations"][-1]
    assert unknown["customer_history"] is False and unknown["has_history"] is False
    # a request for 001 gets 001's answer: its own customer history, found by the exact id, on both routes
    known = set(pd.read_parquet(wd / "features" / "snapshot" / "customer_percentiles.parquet").customer_id)
    assert known <= set(imported.customer_id) and known & set(LOOKALIKE_IDS)
    answers = batch.json()["allocations"]
    assert [a["customer_history"] for a in answers] == [c in known for c in requests.customer_id]
    lookalike = [a for a, c in zip(answers, requests.customer_id) if c in LOOKALIKE_IDS and c in known]
    assert lookalike and all(a["customer_history"] for a in lookalike)
    assert os.path.exists(wd / "bundle" / "bundle.json")


def test_byo_section_step_by_step(tmp_path):
    """docs/your-telemetry.md's "Step by step", literally, in a copy of the repository whose params are shrunk
    as test_pipeline's (to keep CI short) but keep the default night, which the template's days do not
    reach: `pond template`, `pond validate` (blocked, naming the days that fit), base.as_of set to one,
    `generate` replaced by `pond import`, `dvc repro`; then every stage's outputs, and a second `dvc repro` that
    runs nothing (the repository's one end-to-end `dvc repro`: it takes minutes)."""
    from tests.data.test_pipeline import _run, small_repo

    repo = small_repo(tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["base"]["as_of"] = "2026-01-28"
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert "BLOCKED dvc repro" in _run(["pond", "template", "my-telemetry"], repo)
    assert sorted(p.name for p in (repo / "my-telemetry").iterdir()) == \
        ["slowdowns.csv", "spill_counters.csv", "vm_counters.csv", "vm_pool_counters.csv", "vm_slowdowns.csv", "vms.csv",
         "workloads.csv"]
    check = subprocess.run([str(Path(sys.executable).with_name("pond")), "validate", "my-telemetry"], cwd=repo,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 1
    days = re.search(r"set base.as_of in params.yaml to a day from (\S+) to (\S+)", check.stdout)
    assert days, check.stdout
    params["base"]["as_of"] = days.group(2)
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    assert "ready   dvc repro" in _run(["pond", "validate", "my-telemetry"], repo)
    dvc = yaml.safe_load((repo / "dvc.yaml").read_text())
    dvc["stages"]["generate"] = {"cmd": "pond import my-telemetry --out data/raw", "deps": ["my-telemetry"],
                                 "outs": ["data/raw"]}
    (repo / "dvc.yaml").write_text(yaml.safe_dump(dvc, sort_keys=False))
    out = _run(["dvc", "repro"], repo)
    for stage in ("generate", "features", "train_li", "train_monitor", "train_um", "optimize", "evaluate", "backtest",
                  "simulate", "register"):
        assert f"Running stage '{stage}'" in out, stage
    assert "have no lab workload" in out                  # the template's VMs carry no workload_id
    assert "train_li r1.82_pdm5: 2/2 splits (100%)" in out   # progress lines, plain in a log
    assert json.loads((repo / "metrics/evaluate.json").read_text())["day"] == \
        (pd.Timestamp(days.group(2)) + pd.Timedelta(days=1)).date().isoformat()
    # the hypervisor's pool counters (vm_pool_counters), scored by the monitor's model, in the replay and as evidence
    assert json.loads((repo / "metrics/evaluate.json").read_text())["monitor"] == "vm_pool_counters"
    assert json.loads((repo / "data/policy/policy.json").read_text())["fleet_monitor"]["monitor"] == "vm_pool_counters"
    reports = json.loads((repo / "data/policy/policy.json").read_text())["fleet_reports"]   # the optional table, used
    assert reports["rows"] == len(pd.read_csv(repo / "my-telemetry" / "vm_slowdowns.csv")) and reports["keys"] > 0
    for path in ("data/raw/vms.parquet", "data/features/vm_features.parquet",
                 "data/features/snapshot/workload_history.parquet", "data/features/snapshot/request_shapes.parquet",
                 "metrics/features.json", "metrics/calibration.json", "plots/calibration/calibration.png",
                 "data/models/li/manifest.json", "metrics/train_li.json", "data/models/um/um.onnx",
                 "metrics/train_um.json", "plots/optimize/frontier.csv", "metrics/backtest.json",
                 f"data/backtest/{days.group(2)}/scores.parquet", "data/simulate/sizing.csv", "plots/simulate/savings.png"):
        assert (repo / path).exists(), path
    policy = json.loads((repo / "data/policy/policy.json").read_text())
    assert policy["expected"]["mispredictions_bound"] <= policy["misprediction_budget"] + 1e-12
    li = json.loads((repo / "data/models/li/manifest.json").read_text())["models"]["r1.82_pdm5"]
    assert policy["li"]["sha256"] == li["sha256"] and policy["pdm"] == 5 and policy["tp"] == 98
    ev = json.loads((repo / "metrics/evaluate.json").read_text())
    assert {"combined", "li_only", "um_only", "static_10pct", "static_15pct"} <= set(ev)
    assert 0 <= ev["combined"]["mispredictions_severe"] <= ev["combined"]["mispredictions_conservative"]
    # the nightly job is idempotent: nothing changed, nothing runs, and DVC's metrics read the stages' own
    assert "Running stage" not in _run(["dvc", "repro"], repo)
    assert "up to date" in _run(["dvc", "status"], repo)
    assert "metrics/features.json" in _run(["dvc", "metrics", "show"], repo)
