"""The nightly UM model as `train_um` writes it and `backtest` trains it every night: the rolling backtest, the
Fig. 18 trade-off, the final model with its conformal offsets and the parity-checked ONNX export.

Nothing the solver reads depends on a VM created after ``as_of`` or an outcome observed after it
(``models.um_backtest.backtest``); the trade-off on the day after ``as_of`` is a held-out figure for the report."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pond.core.errors import TooLittleHistory
from pond.core.params import UmParams
from pond.models.onnx_export import boundary_rows, check_regressor_parity, export_um, lightgbm_splits, parity_sample
from pond.models.runtime import sha256
from pond.models.um import ConformalOffset, UntouchedModel
from pond.models.um_backtest import backtest, solver_curve, tradeoff
from pond.models.um_dask import WorkerRows, worker_rows
from pond.models.um_protocol import curve_lag, fit_night_scored, night
from pond.telemetry.io import read_days


@dataclass(frozen=True)
class TrainedUm:
    """One night's UM model and the figures about it."""
    model: UntouchedModel
    onnx_bytes: bytes
    manifest: dict[str, Any]     # manifest.json: sha256, features, vocabulary, offsets per target OP, ...
    metrics: dict[str, Any]      # train_um.json
    curve: pd.DataFrame          # the Fig. 18 trade-off on the day after as_of (gbm vs static); empty without it
    nights: pd.DataFrame         # per backtest night: realized OP and UM, raw and calibrated
    sweep: pd.DataFrame          # per night and target OP: the solver's input (heldout_nights.parquet)

    def write(self, out_dir: Path) -> None:
        """The model folder the service and the solver read, into ``out_dir`` (the caller's temp folder: it is
        renamed into place whole).

        Files (``um_lightgbm.txt`` is the same booster as LightGBM text, for reading):
        - ``um.onnx``: input ``X`` float32 [n, len(features)] encoded as in ``models.um.encode`` with the
          manifest's vocabulary; output ``variable`` [n, 1], the raw quantile of the untouched fraction.
        - ``manifest.json``: sha256, features, vocabulary, alpha, and ``offsets``: target OP -> conformal
          offset to subtract from the raw prediction (then clip to [0, 1]).
        - ``heldout_curves.parquet``: one row per target OP: ``um`` (mean share of GB placed on zNUMA),
          ``op`` (mean realized share of VMs overpredicted), ``op_max``, ``nights``, ``vms`` and
          ``overpredicted`` (counts summed over the backtest's next days).
        - ``heldout_nights.parquet``: the solver's input, the same per night and target OP (``as_of``,
          ``target_op``, ``um``, ``op``, ``vms``, ``censored``).
        """
        (out_dir / "um.onnx").write_bytes(self.onnx_bytes)
        (out_dir / "um_lightgbm.txt").write_text(self.model.booster_.model_to_string())
        solver_curve(self.sweep).to_parquet(out_dir / "heldout_curves.parquet", index=False)
        self.sweep.to_parquet(out_dir / "heldout_nights.parquet", index=False)
        (out_dir / "manifest.json").write_text(json.dumps(self.manifest, indent=2))


@contextmanager
def rows_of(path: Path, days: tuple[date, date], columns: list[str], seed: int, client: Any
          ) -> Iterator[pd.DataFrame | WorkerRows]:
    """The nights' rows: read here, or spread over the Dask workers a day at a time (``models.um_dask``)."""
    if client is None:
        yield read_days(path, *days, columns=columns)
        return
    with worker_rows(client, path, *days, columns, seed) as rows:
        yield rows


def train(rows: pd.DataFrame | WorkerRows, as_of: str, p: UmParams, seed: int, client: Any = None,
          figure: bool = True) -> TrainedUm:
    """``rows``: the VM features of the creation days the nights use (``um_protocol.creation_days``), read here or
    held by the Dask workers (``client``). ``figure``: also the Fig. 18 trade-off, a model per quantile in
    ``train_um.alphas``; nothing the night decides reads it, so a backtest's nights go without (40% of their fits)."""
    nights, sweep = backtest(rows, as_of, p, seed, client)
    if nights.empty:
        raise TooLittleHistory(f"no backtest night before {as_of} had VMs to train on and ended VMs to score "
                          f"(the last one scores the day {curve_lag(p)} days before as_of, "
                          "train_um.curve_lag_days): move base.as_of later, or lower train_um.calib_lag_days / "
                          "calib_days")
    curve, metrics = tradeoff(rows, as_of, p, seed, client) if figure else (pd.DataFrame(), {})
    metrics.update({
        "backtest_nights": len(nights), "target_op": p.target_op,
        "backtest_censored_vms": int(nights.censored.sum()), "backtest_scored_vms": int(nights.vms.sum()),
        "raw.nights_within_target": float((nights.op_raw <= p.target_op).mean()),
        "calibrated.nights_within_target": float((nights.op_calibrated <= p.target_op).mean()),
        "raw.mean_op": float(nights.op_raw.mean()), "calibrated.mean_op": float(nights.op_calibrated.mean()),
        "raw.mean_um": float(nights.um_raw.mean()), "calibrated.mean_um": float(nights.um_calibrated.mean()),
    })
    n = night(rows, as_of, p)
    model, cal, calib_pred = fit_night_scored(n, p.target_op, p.target_op, seed, client)
    offsets = {f"{t:g}": ConformalOffset(t).fit(calib_pred, n.calib.untouched_fraction).offset_
               for t in sorted({*p.target_grid, p.target_op})}
    x_train = (model.transform_input(n.train) if isinstance(n.train, pd.DataFrame)
               else n.train.sample(model.encoder_, seed))       # on Dask, a sample of each worker's
    x_calib = model.transform_input(n.calib) if len(n.calib) else x_train[:0]
    nan_rows = x_train[:200].copy()
    nan_rows[:, ::2] = np.nan  # unknown categories and missing customer history
    parity_rows = np.vstack([parity_sample(np.vstack([x_train, x_calib]), seed), nan_rows,
                             boundary_rows(lightgbm_splits(model.booster_), x_train, seed=seed)])
    onnx_bytes = export_um(model.booster_)
    parity = check_regressor_parity(model.booster_, onnx_bytes, parity_rows)
    manifest = {"file": "um.onnx", "sha256": sha256(onnx_bytes), "features": model.features_,
                "vocabulary": model.vocabulary_, "alpha": p.target_op, "target_op": p.target_op,
                "offset": cal.offset_, "offsets": offsets, "as_of": as_of,
                "train_vms": len(n.train), "calib_vms": len(n.calib), "onnx_parity_max_abs_diff": parity}
    metrics["onnx_parity_max_abs_diff"] = parity
    return TrainedUm(model, onnx_bytes, manifest, metrics, curve, nights, sweep)
