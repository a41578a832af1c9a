"""`pond backtest`'s nights, a run of consecutive ones per process: the nightly stages in process into each
night's folder, and what the stage gathers from them. A night reads only the raw tables, the features and the LI
model, never another night's outputs, so the nights split into runs on ``engine.workers`` processes give the files
and rows one process would (the first night's ``scores_before`` is the stage's, after them)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.days import next_day
from pond.core.errors import TooLittleHistory
from pond.core.params import Params
from pond.core.progress import progress, silenced
from pond.core.tracking import BACKTEST
from pond.evaluation import backtest as bt
from pond.models.bundle import BundlePaths
from pond.models.monitor_runtime import MonitorModel
from pond.pipelines import evaluate, optimize, train_um
from pond.telemetry.io import read_days, table_columns
from pond.telemetry.storage import Location


@dataclass
class Outcome:
    """One night's: ``row`` (the night's line), or why it has none (``skipped``: no VM the next day; ``short``: too
    little history to train on)."""

    as_of: str
    row: dict[str, Any] | None = None
    grid: tuple[np.ndarray, np.ndarray] | None = None      # (pool, left slowed) per threshold pair
    admits: np.ndarray | None = None
    candidates: list = field(default_factory=list)
    skipped: bool = False
    short: TooLittleHistory | None = None


def run_nights(nights: list[Params], raw_dir: Location, features_dir: Path, li_dir: Path, tmp: Path,
               monitor_dir: Path | None, client: Any = None) -> list[Outcome]:
    """The nights in order (``nights``: their params, oldest first), each into ``tmp / as_of``; the progress names
    the run's first and last night, so two processes' lines tell apart."""
    path = features_dir / "vm_features.parquet"
    monitor = MonitorModel.load(monitor_dir)
    drift = ["day", "created_at", "vcpus", "memory_gb", *nights[0].features.customer_columns]   # input_drift's
    vmf = read_days(path, *bt.days_read(pd.Timestamp(nights[-1].base.as_of), len(nights), nights[0].train_um.train_days),
                    columns=[c for c in table_columns(path) if c in drift])
    out = []
    with bt.snapshots(nights, raw_dir, tmp, client) as snaps:
        pairs = list(zip(nights, snaps))
        desc = "backtest" if len(nights) < 2 else f"backtest {nights[0].base.as_of} to {nights[-1].base.as_of}"
        for p, snap in progress(pairs, desc=desc, unit="nights"):
            out.append(_night(p, snap, raw_dir, features_dir, li_dir, tmp, monitor_dir, monitor, client, vmf))
    return out


def _night(p: Params, snap: Any, raw_dir: Location, features_dir: Path, li_dir: Path, tmp: Path,
           monitor_dir: Path | None, monitor: MonitorModel | None, client: Any, vmf: pd.DataFrame) -> Outcome:
    as_of, served = p.base.as_of, next_day(p.base.as_of)
    path = features_dir / "vm_features.parquet"
    day = read_days(path, served, served)          # the VMs the night decides, whole rows
    if day.empty:                                  # a gap in an imported trace: nothing to decide or judge
        print(f"backtest: night {as_of} skipped: no VM was created on the next day")
        return Outcome(as_of, skipped=True)
    night, feats = tmp / as_of, tmp / as_of / "features"
    (feats / "snapshot").mkdir(parents=True)
    cust, hist = snap()
    os.symlink(path.resolve(), feats / "vm_features.parquet")
    cust.to_parquet(feats / "snapshot" / "customer_percentiles.parquet", index=False)
    hist.to_parquet(feats / "snapshot" / "workload_history.parquet", index=False)
    del cust, hist                                 # the night's stages read the files
    try:                                           # one line per night, not train_um's own
        with silenced():
            um = train_um.run(p, feats, night / "um", night / "train_um.json", night / "plots", client, BACKTEST,
                              replay=True)
    except TooLittleHistory as exc:
        shutil.rmtree(night)
        return Outcome(as_of, short=exc)
    policy_path = BundlePaths.of(night).policy     # optimize writes it, evaluate reads it
    policy = optimize.run(p, li_dir, night / "um", feats, policy_path, night / "optimize.json",
                          night / "plots" / "frontier.csv", night / "plots" / "frontier.png", raw_dir,
                          monitor_dir=monitor_dir)
    ev = evaluate.run(policy_path, li_dir, night / "um", feats, raw_dir, night / "evaluation",
                      night / "evaluate.json", night / "plots", p.engine, client, p.qos, monitor_dir)
    history = pd.read_parquet(feats / "snapshot" / "workload_history.parquet")
    bt.night_scores(p, night, li_dir, day, history, policy, raw_dir, monitor)
    admits = bt.lab_admits(p, li_dir, feats / "vm_features.parquet", history)
    (feats / "vm_features.parquet").unlink()       # the link served the night; outputs hold no links
    r, pool, mis, candidates = bt.night_regret(policy, li_dir, night / "um",
                                                night / "evaluation" / "decisions.parquet", p.qos)
    inputs = bt.input_drift(vmf, pd.Timestamp(as_of), p.train_um.train_days, p.features.customer_columns)
    return Outcome(as_of, bt.night_row(as_of, policy, ev, r, um, inputs), (pool, mis), admits, candidates)
