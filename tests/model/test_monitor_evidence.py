"""The QoS monitor's flags move the solver, from counters alone: the night's recent VMs are given the counters of the
most slowed-looking VM, and optimize (the fleet's truth removed from the data set) calls fewer VMs insensitive, with
either monitor (the LI model on first-hour counters, the monitor model on counters under the pool). A VM whose first
window ends after as_of is not watched: rewriting its counters leaves the policy byte-identical."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from pond.core.params import Params
from pond.features.history import own_features
from pond.models.inference import load_verified
from pond.models.runtime import onnx_p_insensitive
from pond.optimize.tonight import li_model
from tests.conftest import small_params

pytestmark = pytest.mark.slow


def _uncredited() -> dict:
    """The small params with the monitor's mitigations charged (credit off), the case the credit is measured from."""
    params = small_params()
    params["optimize"]["credit_mitigation"] = False
    return params


def _optimize(bundle: Path, raw: Path, out: Path, params: dict | None = None, monitor: Path | None = None) -> dict:
    """optimize on ``raw``; ``monitor``: the monitor model's folder (default none: the first-hour monitor)."""
    from tests.conftest import run_pond

    out.mkdir(parents=True)
    (out / "params.yaml").write_text(yaml.safe_dump(params or _uncredited()))
    args = ["--params", str(out / "params.yaml"), "optimize", "--li", str(bundle / "li"), "--um", str(bundle / "um"),
            "--features", str(bundle / "features"), "--raw", str(raw), "--out", str(out / "policy.json"),
            "--metrics", str(out / "o.json"), "--frontier", str(out / "f.csv"), "--plot", str(out / "f.png"),
            "--monitor", str(monitor or out / "no-monitor")]
    assert run_pond(args) == 0
    return json.loads((out / "policy.json").read_text())


def _with_counters(raw: Path, out: Path, ids: pd.Series, source: pd.Series) -> Path:
    """A copy of ``raw`` without the fleet's truth, whose VMs ``ids`` have the counters of the VM ``source``."""
    shutil.copytree(raw, out)
    (out / "population_truth.parquet").unlink()
    counters = pd.read_parquet(out / "vm_counters.parquet")
    events = counters.columns[1:]
    hit = counters.vm_id.isin(set(ids)).to_numpy()
    counters.loc[hit, events] = counters.loc[counters.vm_id == source, events].to_numpy()[0]
    counters.to_parquet(out / "vm_counters.parquet", index=False)
    return out


def _recent_as(bundle: Path, raw: Path, out: Path, pick) -> tuple[Path, str]:
    """A copy of ``raw`` without the fleet's truth whose recent VMs (``optimize.recent_days`` up to as_of) have the
    counts and the pool's response of the VM the monitor model scores ``pick`` (``np.nanargmax``: highest) under the
    pool; with that VM's id."""
    from pond.models.monitor_runtime import MonitorModel
    from pond.optimize.monitor import pool_scores
    from pond.telemetry.contract import POOL_FILE

    p = Params(**small_params())
    vms = pd.read_parquet(raw / "vms.parquet")
    at = int(pick(pool_scores(vms, raw, p.optimize.latency_ratio, MonitorModel.load(bundle / "monitor"))))
    vm, workload = vms.vm_id.iloc[at], vms.workload_id.iloc[at]
    vmf = pd.read_parquet(bundle / "features" / "vm_features.parquet", columns=["vm_id", "created_at"])
    end = pd.Timestamp(p.base.as_of, tz="UTC") + pd.Timedelta(days=1)
    recent = vmf[(vmf.created_at >= end - pd.Timedelta(days=p.optimize.recent_days)) & (vmf.created_at < end)]
    copy = _with_counters(raw, out, recent.vm_id, vm)
    mech = pd.read_parquet(copy / POOL_FILE)
    cols = [c for c in mech.columns if c != "workload_id"]
    mech[cols] = mech.loc[mech.workload_id == workload, cols].to_numpy()[0]
    mech.to_parquet(copy / POOL_FILE, index=False)
    return copy, vm


def test_the_monitors_flags_move_the_li_threshold_without_reading_truth(small_bundle, small_raw, tmp_path):
    p = Params(**small_params())
    model = li_model(small_bundle / "li", p.optimize.latency_ratio, p.optimize.pdm)
    sess = load_verified(small_bundle / "li" / model["file"], model["sha256"])
    counters = pd.read_parquet(small_raw / "vm_counters.parquet")
    own = own_features(counters.vm_id, counters)
    slowed = own.index[int(np.argmin(onnx_p_insensitive(sess, own.reindex(columns=model["features"])
                                                        .to_numpy(np.float32), model["classes"])))]
    vmf = pd.read_parquet(small_bundle / "features" / "vm_features.parquet", columns=["vm_id", "created_at"])
    end = pd.Timestamp(p.base.as_of, tz="UTC") + pd.Timedelta(days=1)
    recent = vmf[(vmf.created_at >= end - pd.Timedelta(days=p.optimize.recent_days)) & (vmf.created_at < end)]
    late = recent[recent.created_at + pd.Timedelta(seconds=p.features.counter_delay_s) > end]
    assert len(late) > 0

    a = _optimize(small_bundle, small_raw, tmp_path / "a")
    b = _optimize(small_bundle, _with_counters(small_raw, tmp_path / "raw_b", recent.vm_id, slowed), tmp_path / "b")
    assert a["li"]["enabled"] and a["fleet_monitor"]["vms_watched"] > 100
    assert b["fleet_monitor"]["vms_watched"] == a["fleet_monitor"]["vms_watched"]
    assert b["fleet_monitor"]["vms_flagged"] == b["fleet_monitor"]["vms_watched"] > a["fleet_monitor"]["vms_flagged"]
    # every watched VM flagged: the rate charged is the flag rate over the lab's recall, so LI is off or stricter
    assert not b["li"]["enabled"] or b["li"]["threshold"] > a["li"]["threshold"]
    assert b["li"]["expected_li"] < a["li"]["expected_li"]
    assert b["expected"]["pool_share"] < a["expected"]["pool_share"]

    # the operator's switch: the counters are not read, so the rewritten ones give the same policy as the original
    off = _uncredited()
    off["optimize"]["use_monitor"] = False
    c = _optimize(small_bundle, tmp_path / "raw_b", tmp_path / "c", off)
    _optimize(small_bundle, small_raw, tmp_path / "e", off)
    assert c["fleet_monitor"] == {"vms_watched": 0, "flag_rate": None, "mitigation_spare": None, "recall_divisor": None,
                                  "false_alarm_discount": None}
    assert (tmp_path / "c" / "policy.json").read_bytes() == (tmp_path / "e" / "policy.json").read_bytes()
    # credited, the monitor's capacity is what the LI calls' flags leave of 1% of a day's VMs, and the solver
    # lets more zNUMAs overpredict within the same budget
    assert a["fleet_monitor"]["mitigation_spare"] is None
    credit = _uncredited()
    credit["optimize"]["credit_mitigation"] = True
    f = _optimize(small_bundle, small_raw, tmp_path / "f", credit)
    assert 0 < f["fleet_monitor"]["mitigation_spare"] <= p.qos.max_mitigated_share
    assert f["expected"]["mispredictions_bound"] <= f["misprediction_budget"]
    assert f["expected"]["pool_share"] >= a["expected"]["pool_share"]

    # a VM whose first window had not ended by as_of is not watched: its counters cannot move tonight's policy
    _with_counters(small_raw, tmp_path / "raw_d", late.vm_id, slowed)
    _optimize(small_bundle, tmp_path / "raw_d", tmp_path / "d")
    assert (tmp_path / "d" / "policy.json").read_bytes() == (tmp_path / "a" / "policy.json").read_bytes()
    assert a["fleet_monitor"]["vms_window_not_ended"] > 0


def test_the_pool_monitor_s_flags_move_the_li_threshold_without_reading_truth(small_bundle, small_raw, tmp_path):
    """The monitor model on the recent VMs' counters under the pool (``optimize.monitor.pool_scores``): given the
    counts and the pool's response of the VM it scores highest, every watched VM is flagged, and the solver calls
    fewer VMs insensitive. Neither data set holds any truth."""
    raw_b, slowed = _recent_as(small_bundle, small_raw, tmp_path / "raw_b", np.nanargmax)
    a = _optimize(small_bundle, _with_counters(small_raw, tmp_path / "raw_a", [], slowed), tmp_path / "a",
                  monitor=small_bundle / "monitor")
    b = _optimize(small_bundle, raw_b, tmp_path / "b", monitor=small_bundle / "monitor")
    assert a["fleet_monitor"]["monitor"] == b["fleet_monitor"]["monitor"] == "pool_counters"
    assert a["li"]["enabled"] and a["fleet_monitor"]["vms_watched"] > 100
    assert b["fleet_monitor"]["vms_flagged"] == b["fleet_monitor"]["vms_watched"] > a["fleet_monitor"]["vms_flagged"]
    assert not b["li"]["enabled"] or b["li"]["threshold"] > a["li"]["threshold"]
    assert b["li"]["expected_li"] < a["li"]["expected_li"]
    # the lab's false alarms among its calls taken off the flags: a lower charge, so no smaller a pool
    discounted = _uncredited()
    discounted["optimize"]["discount_false_alarms"] = True
    d = _optimize(small_bundle, tmp_path / "raw_a", tmp_path / "d", discounted, monitor=small_bundle / "monitor")
    assert a["fleet_monitor"]["false_alarm_discount"] is None and d["li"]["enabled"]
    assert 0.0 < d["fleet_monitor"]["false_alarm_discount"] < 1.0
    assert d["fleet_monitor"]["vms_flagged"] == a["fleet_monitor"]["vms_flagged"]
    assert d["expected"]["pool_share"] >= a["expected"]["pool_share"]


def test_without_the_lab_floor_a_monitor_that_flags_no_watched_call_charges_less_than_the_lab(small_bundle, small_raw,
                                                                                                tmp_path):
    """``optimize.lab_floor``: every recent VM given the counts and the pool's response of the VM the monitor model
    scores lowest, so it flags none of the thousands of calls it watches. With the floor (the default) the rate
    charged is never below the lab's posterior mean at the chosen threshold; without it the monitor's counts stand in
    place of the lab's, the charge falls below it, and the solver calls no fewer VMs insensitive."""
    raw, _ = _recent_as(small_bundle, small_raw, tmp_path / "raw", np.nanargmin)
    floor = _optimize(small_bundle, raw, tmp_path / "floor", monitor=small_bundle / "monitor")
    lifted = _uncredited()
    lifted["optimize"]["lab_floor"] = False
    free = _optimize(small_bundle, raw, tmp_path / "free", lifted, monitor=small_bundle / "monitor")
    for got in (floor, free):
        assert got["fleet_monitor"]["monitor"] == "pool_counters" and got["fleet_monitor"]["vms_watched"] > 100
        assert got["fleet_monitor"]["vms_flagged"] <= 0.01 * got["fleet_monitor"]["vms_watched"]
        assert got["li"]["enabled"]
    lab_mean = (floor["li"]["lab_errors"] + 0.5) / (floor["li"]["lab_called"] + 1.0)
    assert floor["li"]["error_rate"] >= lab_mean
    assert free["li"]["error_rate"] < (free["li"]["lab_errors"] + 0.5) / (free["li"]["lab_called"] + 1.0)
    assert free["li"]["expected_li"] >= floor["li"]["expected_li"]
    assert free["expected"]["mispredictions_bound"] <= free["misprediction_budget"]
