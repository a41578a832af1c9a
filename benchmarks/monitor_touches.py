"""Where the QoS monitor's capacity goes when it moves every zNUMA that touched its pool node, and what it buys when
it moves only those it judges to suffer (`qos.touches`), on a finished backtest's nights:

    python -m benchmarks.monitor_touches                        # the default run: data/backtest, data/raw, ...
    python -m benchmarks.monitor_touches RUN [RUN ...]          # run dirs of benchmarks.backtest_variants

Pond §4.4: "For pool-backed VMs and zNUMA VMs with less untouched memory than predicted, we use the sensitivity
model to determine whether the VM workload is suffering excessive performance loss" before it moves the VM to local
DRAM. Over the nights (``<backtest>/<night>/evaluation/decisions.parquet``: the served policy's next days, its
decisions as the backtest made them) this replays the monitor both ways (``evaluation.qos.watch``), its capacity
``qos.max_mitigated_share`` of a day's VMs:

- ``every``: every overpredicted zNUMA flagged (``qos.touches: every``, the default);
- ``judged``: a touched zNUMA flagged only where the monitor model (``<run>/monitor``), on the VM's own first-hour
  counters as they read with its touched memory past its local node on the pool, reaches its threshold over every
  spilled share (``qos.touches: judged``; ``optimize.monitor.touch_spill_pct``, in steps of 5%); a VM the model
  cannot score (no counters) is flagged. No truth is read to flag.

Per way, one JSON line: ``nights_full`` (flags reach the capacity), ``touch_mitigations_pct`` (of the mitigations),
``slowed_calls_mitigated`` (of the calls the scorer finds slowed past the PDM), the next days' unmitigated
mispredictions as the budget counts them (``unmitigated_pct``: every overpredicted zNUMA, Pond's Eq. 1) and those
slowed past the PDM (``unmitigated_severe_pct``: a zNUMA only where its spill pushes its workload past the PDM,
``evaluation.combined``), both as the mean over nights of % of the day's VMs, and ``nights_within_budget`` by the
first. ``best_fixed_pool_pct``: the pool share of the best pair fixed over the nights within the budget on every
night (``evaluation.regret.best_fixed``, on what the monitor leaves each way). For ``judged``: the touched zNUMAs,
those it flags, and the flagged share of the severe ones. The night's pairs are those its solver chose (with the
run's own ``qos.touches``), so the other way's figures are what the same pairs give.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.params import Params, load
from pond.evaluation.backtest import night_regret
from pond.evaluation.qos import summarize, watch
from pond.evaluation.regret import best_fixed
from pond.models.monitor_runtime import MonitorModel
from pond.models.policy import read_policy
from pond.optimize.monitor import touch_spill_pct
from pond.telemetry.io import read_raw

COLUMNS = ["vm_id", "li_called", "memory_gb", "pool_gb", "false_positive", "overpredicted", "severe", "sensitive",
           "lab_truth", "touched_known_gb", "seen_slowed", "created_at", "has_history", "p_insensitive", "um_raw"]


def touched(night: pd.DataFrame) -> np.ndarray:
    """The zNUMAs that touched their pool node (``watch``'s overpredicted zNUMAs)."""
    pooled = night["pool_gb"].to_numpy(float) > 0
    return pooled & ~night["li_called"].to_numpy(bool) & night["overpredicted"].to_numpy(bool)


def spilled_pct(night: pd.DataFrame) -> np.ndarray:
    """Each VM's touched memory past its local node, as % of what it touched."""
    used = night["touched_known_gb"].to_numpy(float)
    local = night["memory_gb"].to_numpy(float) - night["pool_gb"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(used > 0, 100.0 * np.clip(used - local, 0.0, None) / used, 0.0)


def judged(night: pd.DataFrame, vms: pd.DataFrame, raw: Path, ratio: float, monitor: MonitorModel) -> np.ndarray:
    """Per VM of ``night``, the least share of its touched memory past its local node at which the monitor flags it
    (``optimize.monitor.touch_spill_pct``, in steps of 5%)."""
    rows = vms.reindex(night["vm_id"].astype(str).to_numpy()).reset_index()
    got = touch_spill_pct(rows, raw, ratio, monitor)
    assert got is not None, "the run has no mechanisms table (population_pool) or no monitor model"
    return got


def run_inputs(run: dict[str, Path]) -> tuple[Params, MonitorModel, pd.DataFrame, list[Path]]:
    """A finished run's params, monitor model, `vms` table (by ``vm_id``) and nightly decision files; exits with what
    to run first where one is missing."""
    params = load(run["params"])
    monitor = MonitorModel.load(run["monitor"])
    if monitor is None:
        raise SystemExit(f"{run['monitor']}: no monitor model; run `pond train_monitor` first")
    vms = read_raw(run["raw"] / "vms.parquet", "vms")
    vms = vms.assign(vm_id=vms["vm_id"].astype(str)).set_index("vm_id")
    files = sorted(run["backtest"].glob("*/evaluation/decisions.parquet"))
    if not files:
        raise SystemExit(f"{run['backtest']}: no <night>/evaluation/decisions.parquet; run `pond backtest` first")
    return params, monitor, vms, files


def both_ways(run: dict[str, Path]) -> list[dict[str, object]]:
    params, monitor, vms, files = run_inputs(run)
    ratio, share, budget = params.optimize.latency_ratio, params.qos.max_mitigated_share, 1 - params.optimize.tp / 100
    per_way: dict[str, list[dict[str, float]]] = {"every": [], "judged": []}
    grids: dict[str, list[np.ndarray]] = {"every": [], "judged": []}
    pools, counts = [], {"touched_znumas": 0, "touches_flagged": 0, "severe_touches": 0, "severe_touches_flagged": 0}
    for f in files:
        night = pd.read_parquet(f, columns=COLUMNS)
        least = judged(night, vms, run["raw"], ratio, monitor)
        policy, um = read_policy(f.parent.parent / "policy.json"), f.parent.parent / "um"
        for way, spill in (("every", np.zeros(len(night))), ("judged", least)):
            _, pool, left, _ = night_regret(policy, run["li"], um, f, params.qos, touch_spill_pct=spill)
            grids[way].append(left)
        pools.append(pool)
        t, severe = touched(night), night["severe"].to_numpy(bool)
        seen_touch = spilled_pct(night) >= least
        counts["touched_znumas"] += int(t.sum())
        counts["touches_flagged"] += int((t & seen_touch).sum())
        counts["severe_touches"] += int((t & severe).sum())
        counts["severe_touches_flagged"] += int((t & severe & seen_touch).sum())
        for way, touch in (("every", None), ("judged", seen_touch)):
            w = watch(night, night["seen_slowed"].to_numpy(bool), night["created_at"].to_numpy(), share,
                      touch_seen=touch)
            s = summarize(w)
            called = night["li_called"].to_numpy(bool) & (night["pool_gb"].to_numpy(float) > 0)
            mitigated, slowed = w["mitigated"].to_numpy(bool), called & night["false_positive"].to_numpy(bool)
            per_way[way].append({
                "full": float(w["flagged"].sum() >= np.floor(share * len(night) + 1e-9)),
                "mitigations": float(mitigated.sum()), "touch_mitigations": float((mitigated & t).sum()),
                "slowed": float(slowed.sum()), "slowed_mitigated": float((slowed & mitigated).sum()),
                "unmitigated": s["mispredictions_unmitigated"],
                "unmitigated_severe": float((severe & ~mitigated).sum() / max(len(night), 1))})
    out = []
    for way, nights in per_way.items():
        n = pd.DataFrame(nights)
        fixed = best_fixed(pools, grids[way], budget)
        row: dict[str, object] = {
            "backtest": str(run["backtest"]), "way": way, "nights": len(n), "nights_full": int(n["full"].sum()),
            "touch_mitigations_pct": round(100 * n["touch_mitigations"].sum() / max(n["mitigations"].sum(), 1), 1),
            "slowed_calls": int(n["slowed"].sum()),
            "slowed_calls_mitigated": round(n["slowed_mitigated"].sum() / max(n["slowed"].sum(), 1), 4),
            "unmitigated_pct": round(100 * n["unmitigated"].mean(), 3),
            "unmitigated_severe_pct": round(100 * n["unmitigated_severe"].mean(), 3),
            "nights_within_budget": int((n["unmitigated"] <= budget + 1e-12).sum()),
            "best_fixed_pool_pct": None if fixed is None else round(100 * float(np.mean([g[fixed] for g in pools])), 2)}
        out.append(row | (counts if way == "judged" else {}))
    return out


def layout(run: Path | None) -> dict[str, Path]:
    """A backtest_variants run dir's paths, or the repository's default run."""
    if run is None:
        return {"backtest": Path("data/backtest"), "raw": Path("data/raw"), "monitor": Path("data/models/monitor"),
                "li": Path("data/models/li"), "params": Path("params.yaml")}
    return {"backtest": run / "backtest", "raw": run / "raw", "monitor": run / "monitor", "li": run / "li",
            "params": run / "params.yaml"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path, nargs="*")
    a = ap.parse_args()
    for run in a.runs or [None]:
        for row in both_ways(layout(run)):
            print(json.dumps(row))


if __name__ == "__main__":
    main()
