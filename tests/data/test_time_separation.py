"""Nothing `optimize` reads may depend on the future: scramble every row created after as_of (and
every outcome observed after it), rerun features -> train_li -> train_um -> optimize, and the
policy and both models come out byte-identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import NIGHT, run_night, small_params

pytestmark = pytest.mark.slow


def _night(raw: Path, wd: Path) -> Path:
    return run_night(raw, wd, NIGHT[:-1])      # up to optimize: what the policy is made from


def scramble(raw: Path, out: Path, as_of: str, seed: int = 7) -> int:
    """A copy of ``raw`` whose future is rewritten: rows created after the as-of day get shuffled
    customers, types, sizes and outcomes and rescaled counters; VMs alive at the end of the as-of
    day get other (still later) deletion times and outcomes. Returns how many rows changed."""
    shutil.copytree(raw, out)
    rng = np.random.default_rng(seed)
    end = pd.Timestamp(as_of, tz="UTC") + pd.Timedelta(days=1)
    vms = pd.read_parquet(raw / "vms.parquet")
    future = (vms.created_at >= end).to_numpy()
    alive = (~future) & (vms.deleted_at.isna() | (vms.deleted_at >= end)).to_numpy()
    idx = np.flatnonzero(future)
    for col in ("customer_id", "vm_type", "os", "region", "cluster_id"):
        vms.loc[idx, col] = vms[col].to_numpy()[rng.permutation(idx)]
    sizes = rng.permutation(idx)
    vms.loc[idx, "vcpus"], vms.loc[idx, "memory_gb"] = vms.vcpus.to_numpy()[sizes], vms.memory_gb.to_numpy()[sizes]
    later = np.flatnonzero(future | alive)
    ended = vms.loc[later, "deleted_at"].notna().to_numpy()
    shift = pd.to_timedelta(rng.integers(60, 86400 * 3, len(later)), unit="s")
    start = np.maximum(vms.loc[later, "created_at"], end)
    vms.loc[later[ended], "deleted_at"] = (start + shift)[ended].to_numpy()
    vms.loc[later[ended], "untouched_fraction"] = rng.random(int(ended.sum())).round(4)
    vms.loc[later[~ended], "untouched_so_far"] = rng.random(int((~ended).sum())).round(4)
    vms.to_parquet(out / "vms.parquet", index=False)
    counters = pd.read_parquet(raw / "vm_counters.parquet")
    hit = counters.vm_id.isin(set(vms.vm_id[future])).to_numpy()
    events = counters.columns[1:]
    counters.loc[hit, events] = np.round(counters.loc[hit, events].to_numpy() * rng.uniform(0.2, 5.0, (hit.sum(), 1)))
    counters.to_parquet(out / "vm_counters.parquet", index=False)
    return len(later)


def test_scrambled_future_leaves_policy_and_models_identical(small_raw, small_bundle, tmp_path, monkeypatch):
    """The night on the true future is the session's small bundle (the same stages and params on the same raw)."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    as_of = small_params()["base"]["as_of"]
    changed = scramble(small_raw, tmp_path / "scrambled", as_of)
    assert changed > 1000
    a, b = small_bundle, _night(tmp_path / "scrambled", tmp_path / "b")
    original = pd.read_parquet(small_raw / "vms.parquet")
    assert not original.equals(pd.read_parquet(tmp_path / "scrambled" / "vms.parquet"))
    assert (a / "policy.json").read_bytes() == (b / "policy.json").read_bytes()
    assert (a / "um" / "um.onnx").read_bytes() == (b / "um" / "um.onnx").read_bytes()
    assert (a / "um" / "heldout_nights.parquet").read_bytes() == (b / "um" / "heldout_nights.parquet").read_bytes()
    for f in json.loads((a / "li" / "manifest.json").read_text())["models"].values():
        assert (a / "li" / f["file"]).read_bytes() == (b / "li" / f["file"]).read_bytes()
    # and the future did reach the report-only figures: the scramble is not a no-op
    assert json.loads((a / "um.json").read_text()) != json.loads((b / "um.json").read_text())


def _optimize(bundle: Path, raw: Path, out: Path, params: Path | None = None) -> dict:
    from tests.conftest import run_pond

    out.mkdir(parents=True)
    args = ["--params", str(params or bundle / "params.yaml"), "optimize", "--li", str(bundle / "li"), "--um", str(bundle / "um"),
            "--features", str(bundle / "features"), "--raw", str(raw), "--out", str(out / "policy.json"),
            "--metrics", str(out / "o.json"), "--frontier", str(out / "f.csv"), "--plot", str(out / "f.png"),
            "--monitor", str(bundle / "monitor")]
    assert run_pond(args) == 0
    return json.loads((out / "policy.json").read_text())


def test_fleet_reports_count_only_what_was_known_at_as_of(small_bundle, small_raw, small_reports_raw, tmp_path):
    """vm_slowdowns measured after as_of are rewritten: the policy stays byte-identical. The reports known by
    then did reach it (the small fleets' VMs and counters are the same, so the bundle's models serve both)."""
    end = pd.Timestamp(small_params()["base"]["as_of"], tz="UTC") + pd.Timedelta(days=1)
    scrambled = tmp_path / "scrambled"
    shutil.copytree(small_reports_raw, scrambled)
    reports = pd.read_parquet(scrambled / "vm_slowdowns.parquet")
    later = (reports.measured_at >= end).to_numpy()
    reports.loc[later, "slowdown_pct"] = np.random.default_rng(3).uniform(-1.0, 60.0, later.sum()).round(3)
    reports.to_parquet(scrambled / "vm_slowdowns.parquet", index=False)
    a = _optimize(small_bundle, small_reports_raw, tmp_path / "a")
    _optimize(small_bundle, scrambled, tmp_path / "b")
    assert (tmp_path / "a" / "policy.json").read_bytes() == (tmp_path / "b" / "policy.json").read_bytes()
    r = a["fleet_reports"]
    assert r["rows"] == len(reports) and r["rows_measured_after_as_of"] == int(later.sum()) > 0
    assert r["keys"] > 10 and r["vms_used"] >= r["keys"]
    assert r["vms_measured"] == r["vms_not_in_window"] + r["vms_without_history"] + r["vms_used"]
    lab_only = _optimize(small_bundle, small_raw, tmp_path / "c")
    assert lab_only["fleet_reports"] == {"rows": 0} and lab_only["li"]["fleet_called"] == 0
    off = small_params()
    off["optimize"]["use_reports"] = False           # the operator's switch: the table is there, and not counted
    (tmp_path / "off.yaml").write_text(yaml.safe_dump(off))
    _optimize(small_bundle, small_reports_raw, tmp_path / "d", tmp_path / "off.yaml")
    assert (tmp_path / "c" / "policy.json").read_bytes() == (tmp_path / "d" / "policy.json").read_bytes()
    li = a["li"]
    assert li["enabled"] and li["fleet_called"] > 0   # the fleet's keys were counted at the chosen threshold
    # the rate charged: at least the Jeffreys mean of lab and fleet counts together
    called, errors = li["lab_called"] + li["fleet_called"], li["lab_errors"] + li["fleet_errors"]
    assert li["error_rate"] >= (errors + 0.5) / (called + 1.0) - 1e-12
