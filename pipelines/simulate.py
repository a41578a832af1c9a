"""Stage `simulate`: DRAM saved by pooling vs pool size, per policy (Pond Fig. 3, 21), with the cost line.

Built-in fleet (``--policy`` given): the VMs created after the as-of day, none of which the models
saw, each split local/pool by the optimized policy, LI only, UM only, and static 10/30/50% pools.
Imported trace (``--static-only``, e.g. an Azure V2 vmtable): the whole trace, static pools only,
since the trace carries neither counters nor untouched memory for the models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.errors import ConfigError
from core.params import Params
from evaluation.plots import pyplot, save_figure
from evaluation.pool_sim import SimParams, dram_savings, place
from models.decision import decide, policy_knobs, pool_gb
from models.inference import Models, score
from models.policy import read_policy
from telemetry.io import read_tables, write_json

HEADLINE_SOCKETS = 16   # Pond Finding 9 quotes savings at a 16-socket pool


def _seconds(vms: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Seconds since the trace's first arrival; running VMs stay until one second past the last event."""
    t0 = vms["created_at"].min()
    start = ((vms["created_at"] - t0).dt.total_seconds()).to_numpy().astype(np.int64)
    end_t = (vms["deleted_at"] - t0).dt.total_seconds()
    horizon = int(max(start.max(), np.nanmax(end_t.to_numpy(float), initial=0))) + 1
    return start, end_t.fillna(horizon).to_numpy().astype(np.int64)


def _policies(sp: SimParams, vms: pd.DataFrame, policy_path: Path | None,
              li_dir: Path, um_dir: Path, features_dir: Path) -> dict[str, np.ndarray]:
    mem = vms["memory_gb"].to_numpy(float)
    out: dict[str, np.ndarray] = {}
    if policy_path is not None:
        policy = read_policy(policy_path)
        s = score(Models.from_policy(policy, li_dir, um_dir), vms,
                  pd.read_parquet(features_dir / "snapshot" / "workload_history.parquet"))
        for name, knobs in policy_knobs(policy).items():
            out[name] = decide(mem, s.has_history, s.p_insensitive, s.um_raw, knobs)["pool_gb"]
    for f in sp.static_fractions:
        out[f"static_{round(f * 100)}pct"] = pool_gb(np.full(len(mem), f), mem)
    return out


def run(params: Params, raw_dir: Path, features_dir: Path, policy_path: Path | None, li_dir: Path,
        um_dir: Path, metrics_path: Path, plots_dir: Path, pack_by: str = "cluster_id") -> dict[str, Any]:
    sp = params.simulate
    if policy_path is None:
        vms = read_tables(raw_dir, ["vms"])["vms"]
        window = "whole trace"
    else:
        as_of = pd.Timestamp(read_policy(policy_path)["as_of"])
        vmf = pd.read_parquet(features_dir / "vm_features.parquet")
        vms = vmf[vmf["created_at"] >= (as_of + pd.Timedelta(days=1)).tz_localize(vmf["created_at"].dt.tz)]
        vms = vms.merge(read_tables(raw_dir, ["vms"])["vms"][["vm_id", "server_id"]], on="vm_id", how="left")
        window = f"created after {as_of.date()}"
    vms = vms.sort_values("vm_id", kind="stable").reset_index(drop=True)
    if vms.empty:
        raise ConfigError(f"simulate: no VMs to replay ({window}); move base.as_of earlier or import a trace")
    start, end = _seconds(vms)
    placement = place(vms, start, end, sp, pack_by)
    table = dram_savings(placement, start, end, vms["memory_gb"].to_numpy(float),
                         _policies(sp, vms, policy_path, li_dir, um_dir, features_dir), sp.pool_sockets)
    head = table[table.pool_sockets == HEADLINE_SOCKETS].set_index("policy")
    metrics: dict[str, Any] = {
        "window": window, "vms": int(len(vms)), "hosts": int(len(np.unique(np.c_[placement.cluster, placement.host], axis=0))),
        "assignment": placement.assignment, "oversized_vms": placement.oversized,
        "dram_cost_share": sp.dram_cost_share, "headline_pool_sockets": HEADLINE_SOCKETS,
        "savings_at_headline": {p: round(float(r.savings), 5) for p, r in head.iterrows()},
        "server_cost_saving_at_headline": {p: round(float(r.savings) * sp.dram_cost_share, 5) for p, r in head.iterrows()},
    }
    write_json(metrics_path, metrics)
    plots_dir.mkdir(parents=True, exist_ok=True)
    curves = table.assign(savings_pct=(100 * table.savings).round(3))[["policy", "pool_sockets", "savings_pct"]]
    curves.to_csv(plots_dir / "savings.csv", index=False)
    _plot(curves, plots_dir / "savings.png", window)
    print(f"simulate: {len(vms)} VMs ({window}) on {metrics['hosts']} hosts ({placement.assignment})")
    for p, r in head.iterrows():
        print(f"simulate {p:12s} {HEADLINE_SOCKETS}-socket pools save {100 * r.savings:+6.2f}% of DRAM, "
              f"{100 * r.savings * sp.dram_cost_share:+5.2f}% of server cost (DRAM = {sp.dram_cost_share:.0%} of it)")
    return metrics


def _plot(curves: pd.DataFrame, path: Path, window: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, c in curves.groupby("policy", sort=False):
        ax.plot(c.pool_sockets, c.savings_pct, marker="o", label=name)
    ax.set(xscale="log", xlabel="pool size (sockets)", ylabel="DRAM saved vs all-local (%)",
           title=f"DRAM saved by pooling ({window})")
    ax.set_xticks(sorted(curves.pool_sockets.unique()), [str(k) for k in sorted(curves.pool_sockets.unique())])
    ax.axhline(0, color="k", lw=0.5)
    ax.legend(fontsize=8)
    save_figure(fig, path)
