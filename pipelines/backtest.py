"""`pond backtest N`: the nightly job replayed over N consecutive nights ending at ``base.as_of``.

Each night: the snapshot as of that day, then the stages `train_um`, `optimize` and `evaluate` run in process
into the night's folder, as the nightly job runs them (the LI forest is trained on lab runs, not on the night,
so the pipeline's `data/models/li` serves every night); the night's regret, the drift of the UM model's inputs
and what `simulate` needs to replay the night are ``evaluation.backtest``'s. Runs go to the MLflow experiment
``pond-backtest`` so they do not crowd the nightly one. The models are trained once, here; `simulate` only replays.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd

from pond.core.cluster import session
from pond.core.days import next_day
from pond.core.errors import ConfigError, TooLittleHistory
from pond.core.params import Params
from pond.core.progress import progress, silenced
from pond.core.tracking import BACKTEST
from pond.evaluation import backtest as bt
from pond.models.bundle import BundlePaths
from pond.models.monitor_runtime import MonitorModel
from pond.pipelines import evaluate, optimize, train_um
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_alive, read_days, table_columns
from pond.telemetry.storage import Location


def run(params: Params, n_nights: int | None, raw_dir: Location, features_dir: Path, li_dir: Path, out_dir: Path,
        plots_dir: Path, metrics_path: Path | None = None, monitor_dir: Path | None = None) -> pd.DataFrame:
    n_nights = params.backtest.nights if n_nights is None else n_nights
    if n_nights < 1:
        raise ConfigError("backtest N needs N >= 1 nights")
    last, monitor = pd.Timestamp(params.base.as_of), MonitorModel.load(monitor_dir)
    path = features_dir / "vm_features.parquet"
    drift = ["day", "created_at", "vcpus", "memory_gb", *params.features.customer_columns]   # input_drift's
    vmf = read_days(path, *bt.days_read(last, n_nights, params.train_um.train_days),
                    columns=[c for c in table_columns(path) if c in drift])
    nights = [params.with_as_of((last - pd.Timedelta(days=k)).date().isoformat())   # in order, as nightly
              for k in range(n_nights - 1, -1, -1)]
    rows, skipped, grids, admits, short = [], [], [], [], []   # grids: (pool, left slowed) per pair
    with AtomicDir(out_dir) as tmp, session(params.engine) as client, \
            bt.snapshots(nights, raw_dir, tmp, client) as snaps:
        for p, snap in progress(list(zip(nights, snaps)), desc="backtest", unit="nights"):
            as_of, served = p.base.as_of, next_day(p.base.as_of)
            day = read_days(path, served, served)          # the VMs the night decides, whole rows
            if day.empty:                          # a gap in an imported trace: nothing to decide or judge
                print(f"backtest: night {as_of} skipped: no VM was created on the next day")
                skipped.append(as_of)
                continue
            night, feats = tmp / as_of, tmp / as_of / "features"
            (feats / "snapshot").mkdir(parents=True)
            cust, hist = snap()
            os.symlink((features_dir / "vm_features.parquet").resolve(), feats / "vm_features.parquet")
            cust.to_parquet(feats / "snapshot" / "customer_percentiles.parquet", index=False)
            hist.to_parquet(feats / "snapshot" / "workload_history.parquet", index=False)
            del cust, hist                         # the night's stages read the files
            try:                                   # one line per night (above), not train_um's own
                with silenced():
                    um = train_um.run(p, feats, night / "um", night / "train_um.json", night / "plots", client,
                                      BACKTEST, replay=True)
            except TooLittleHistory as exc:
                bt.short_history(short, bool(rows), as_of, n_nights, exc)
                shutil.rmtree(night)
                continue
            policy_path = BundlePaths.of(night).policy  # optimize writes it, evaluate reads it
            policy = optimize.run(p, li_dir, night / "um", feats, policy_path, night / "optimize.json",
                                  night / "plots" / "frontier.csv", night / "plots" / "frontier.png", raw_dir,
                                  monitor_dir=monitor_dir)
            ev = evaluate.run(policy_path, li_dir, night / "um", feats, raw_dir, night / "evaluation",
                              night / "evaluate.json", night / "plots", p.engine, client, p.qos, monitor_dir)
            history = pd.read_parquet(feats / "snapshot" / "workload_history.parquet")
            bt.night_scores(p, night, li_dir, day, history, policy, raw_dir, monitor)
            if not rows:                           # the first night also decides the VMs its next day opens with
                bt.scores_before(p, night, li_dir, read_alive(path, served), history, raw_dir, monitor)
            admits.append(bt.lab_admits(p, li_dir, feats / "vm_features.parquet", history))
            (feats / "vm_features.parquet").unlink()   # the link served the night; outputs hold no links
            r, pool, mis, candidates = bt.night_regret(policy, li_dir, night / "um",
                                                        night / "evaluation" / "decisions.parquet", p.qos)
            grids.append((pool, mis))
            inputs = bt.input_drift(vmf, pd.Timestamp(as_of), p.train_um.train_days, p.features.customer_columns)
            rows.append(bt.night_row(as_of, policy, ev, r, um, inputs))
        if not rows and short and not skipped:
            raise short[-1]                        # not one night: the error train_um gives
        if not rows:
            raise ConfigError(f"backtest: no VM was created on the day after any of the {n_nights} nights ending "
                              f"{last.date()}; move base.as_of or import a trace that covers those days")
        nights, fixed, admitted_pair = bt.with_fixed_regret(pd.DataFrame(rows), grids, admits)
        nights.to_csv(tmp / "nights.csv", index=False)
    plots_dir.mkdir(parents=True, exist_ok=True)
    bt.plot_nights(nights, plots_dir / "backtest.png")
    m = bt.summary(nights, len(skipped), fixed, candidates, admitted_pair, n_nights, len(short))
    if metrics_path is not None:
        write_json(metrics_path, m)
    print(f"{bt.summary_line(m)} -> {out_dir / 'nights.csv'}, {plots_dir / 'backtest.png'}")
    return nights
