"""`pond backtest N`: the nightly job replayed over N consecutive nights ending at ``base.as_of``.

Each night: the snapshot as of that day, then the stages `train_um`, `optimize` and `evaluate` run in process
into the night's folder, as the nightly job runs them (the LI forest is trained on lab runs, not on the night,
so the pipeline's `data/models/li` serves every night); the night's regret, the drift of the UM model's inputs
and what `simulate` needs to replay the night are ``evaluation.backtest``'s. Once every night is done, the
service's memory of the monitor's flags runs through them in time order (``evaluation.refusal``). Runs go to the
MLflow experiment ``pond-backtest`` so they do not crowd the nightly one. The models are trained once, here; `simulate` only replays.
With the local engine the nights run in ``engine.workers`` processes, a run of consecutive nights each
(``pipelines.backtest_nights``): a night reads no other night's outputs, so the files are the same.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.cluster import session
from pond.core.days import next_day
from pond.core.errors import ConfigError
from pond.core.params import Params
from pond.core.tracking import BACKTEST, ensure_experiment
from pond.evaluation import backtest as bt
from pond.evaluation.refusal_nights import refusal_rows
from pond.models.monitor_runtime import MonitorModel
from pond.pipelines.backtest_nights import run_nights
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_alive
from pond.telemetry.storage import Location


def run(params: Params, n_nights: int | None, raw_dir: Location, features_dir: Path, li_dir: Path, out_dir: Path,
        plots_dir: Path, metrics_path: Path | None = None, monitor_dir: Path | None = None) -> pd.DataFrame:
    n_nights = params.backtest.nights if n_nights is None else n_nights
    if n_nights < 1:
        raise ConfigError("backtest N needs N >= 1 nights")
    last, path = pd.Timestamp(params.base.as_of), features_dir / "vm_features.parquet"
    nights = [params.with_as_of((last - pd.Timedelta(days=k)).date().isoformat())   # in order, as nightly
              for k in range(n_nights - 1, -1, -1)]
    rows, skipped, grids, admits, short, candidates = [], [], [], [], [], []   # grids: (pool, left slowed) per pair
    with AtomicDir(out_dir) as tmp, session(params.engine) as client:
        runs = [list(r) for r in np.array_split(np.arange(n_nights), min(params.engine.workers, n_nights)) if len(r)]
        if client is not None or len(runs) == 1:
            outcomes = run_nights(nights, raw_dir, features_dir, li_dir, tmp, monitor_dir, client)
        else:                                  # a run of consecutive nights a process: their UM fits are shared
            ensure_experiment(BACKTEST)        # created once, not by two processes at once
            with ProcessPoolExecutor(len(runs), mp_context=get_context("spawn")) as pool:
                done = [pool.submit(run_nights, [nights[i] for i in r], raw_dir, features_dir, li_dir, tmp,
                                    monitor_dir) for r in runs]   # each names its nights in its progress
                outcomes = [o for f in done for o in f.result()]
        for o in outcomes:                     # in order, as one process would have met them
            if o.skipped:
                skipped.append(o.as_of)
            elif o.short is not None:
                bt.short_history(short, bool(rows), o.as_of, n_nights, o.short)
            else:
                rows.append(o.row)
                grids.append(o.grid)
                admits.append(o.admits)
                candidates = o.candidates
        if not rows and short and not skipped:
            raise short[-1]                        # not one night: the error train_um gives
        if not rows:
            raise ConfigError(f"backtest: no VM was created on the day after any of the {n_nights} nights ending "
                              f"{last.date()}; move base.as_of or import a trace that covers those days")
        first = next(o.as_of for o in outcomes if o.row is not None)   # it also decides the VMs its next day opens with
        night = tmp / first
        bt.scores_before(params.with_as_of(first), night, li_dir, read_alive(path, next_day(first)),
                         pd.read_parquet(night / "features" / "snapshot" / "workload_history.parquet"), raw_dir,
                         MonitorModel.load(monitor_dir))
        done = [tmp / o.as_of for o in outcomes if o.row is not None]
        rows = [r | m for r, m in zip(rows, refusal_rows(done, path, raw_dir, params.qos,
                                                         params.features.counter_delay_s).to_dict("records"),
                                      strict=True)]
        nights, fixed, admitted_pair = bt.with_fixed_regret(pd.DataFrame(rows), grids, admits)
        nights.to_csv(tmp / "nights.csv", index=False)
    plots_dir.mkdir(parents=True, exist_ok=True)
    bt.plot_nights(nights, plots_dir / "backtest.png")
    m = bt.summary(nights, len(skipped), fixed, candidates, admitted_pair, n_nights, len(short))
    if metrics_path is not None:
        write_json(metrics_path, m)
    print(f"{bt.summary_line(m)} -> {out_dir / 'nights.csv'}, {plots_dir / 'backtest.png'}")
    return nights
