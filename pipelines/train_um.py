"""Stage `train_um`: rolling backtest, Fig. 18 trade-off vs a static fraction, the final nightly
model (raw quantile + conformal offsets), its ONNX export (parity-checked) and an MLflow run.

Outputs in ``out_dir``:
- ``um.onnx``: input ``X`` float32 [n, len(features)] encoded as in ``models.um.encode`` with the
  manifest's vocabulary; output ``variable`` [n, 1], the raw quantile of the untouched fraction.
- ``manifest.json``: sha256, features, vocabulary, alpha, and ``offsets``: target OP -> conformal
  offset to subtract from the raw prediction (then clip to [0, 1]).
- ``heldout_curves.parquet``: one row per target OP: ``um`` (mean share of GB placed on zNUMA),
  ``op`` (mean realized share of VMs overpredicted), ``op_max``, ``nights``, ``vms`` and
  ``overpredicted`` (counts summed over the backtest's next days).
- ``heldout_nights.parquet``: the solver's input, the same per night and target OP (``as_of``,
  ``target_op``, ``um``, ``op``, ``vms``, ``censored``).

Nothing the solver reads depends on a VM created after ``base.as_of`` or an outcome observed
after it (``evaluation.um_backtest.backtest``); the Fig. 18 trade-off on the day after ``as_of``
is a held-out figure for the report only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd

from pond.core.cluster import session
from pond.core.errors import ConfigError
from pond.core.params import Params
from pond.evaluation.plots import pyplot, save_figure
from pond.evaluation.um_backtest import backtest, solver_curve, tradeoff
from pond.models.dask_fit import workers_of
from pond.models.onnx_export import boundary_rows, check_regressor_parity, export_um, lightgbm_splits
from pond.models.runtime import sha256
from pond.models.um import ConformalOffset, customer_columns_of
from pond.models.um_dask import WorkerRows, worker_rows
from pond.models.um_protocol import creation_days, fit_night, night, night_columns
from pond.pipelines.tracking import start_run
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_days, table_columns


def run(params: Params, features_dir: Path, out_dir: Path, metrics_path: Path,
        plots_dir: Path, client: Any = None) -> dict[str, Any]:
    """``client``: the caller's Dask client (`backtest` keeps one for all its nights); without it,
    ``engine.backend: dask`` starts a session for this stage."""
    if client is None and params.engine.backend != "local":
        with session(params.engine) as own:
            return run(params, features_dir, out_dir, metrics_path, plots_dir, own)
    p, seed, as_of = params.train_um, params.base.seed, params.base.as_of
    path = features_dir / "vm_features.parquet"
    columns = night_columns(table_columns(path))
    have, want = customer_columns_of(columns), params.features.customer_columns
    if have != want:
        raise ConfigError(f"{features_dir / 'vm_features.parquet'} has customer columns {have}, but "
                          f"features.percentiles gives {want}: the features stage ran with other params; "
                          "rerun it (`dvc repro`)")
    # the rows first: a table that cannot be read leaves no failed MLflow run behind
    with _rows(path, creation_days(as_of, p), columns, seed, client) as vf, \
            start_run("train_um", {"seed": seed, "as_of": as_of, **p.model_dump()}) as _, AtomicDir(out_dir) as tmp:
        import mlflow
        if client is not None:
            print(f"train_um: LightGBM on Dask (lightgbm.dask), {len(workers_of(client))} workers")
        nights, sweep = backtest(vf, as_of, p, seed, client)
        if nights.empty:
            raise ConfigError(f"no backtest night before {as_of} had VMs to train on and ended VMs to score "
                              f"(nights end train_um.calib_lag_days={p.calib_lag_days} days before as_of): move "
                              "base.as_of later, or lower train_um.calib_lag_days / calib_days")
        curve, metrics = tradeoff(vf, as_of, p, seed, client)
        metrics.update({
            "backtest_nights": int(len(nights)), "target_op": p.target_op,
            "backtest_censored_vms": int(nights.censored.sum()), "backtest_scored_vms": int(nights.vms.sum()),
            "raw.nights_within_target": float((nights.op_raw <= p.target_op).mean()),
            "calibrated.nights_within_target": float((nights.op_calibrated <= p.target_op).mean()),
            "raw.mean_op": float(nights.op_raw.mean()), "calibrated.mean_op": float(nights.op_calibrated.mean()),
            "raw.mean_um": float(nights.um_raw.mean()), "calibrated.mean_um": float(nights.um_calibrated.mean()),
        })
        n = night(vf, as_of, p)
        model, cal = fit_night(n, p.target_op, p.target_op, seed, client)
        calib_pred = model.predict(n.calib)
        offsets = {f"{t:g}": ConformalOffset(t).fit(calib_pred, n.calib.untouched_fraction).offset_
                   for t in sorted({*p.target_grid, p.target_op})}
        X_train = (model.transform_input(n.train) if isinstance(n.train, pd.DataFrame)
                   else n.train.sample(model.encoder_, seed))       # on Dask, a sample of each worker's
        X_calib = model.transform_input(n.calib) if len(n.calib) else X_train[:0]
        nan_rows = X_train[:200].copy()
        nan_rows[:, ::2] = np.nan  # unknown categories and missing customer history
        parity_rows = np.vstack([X_train, X_calib, nan_rows,
                                 boundary_rows(lightgbm_splits(model.booster_), X_train, seed=seed)])
        onnx_bytes = export_um(model.booster_)
        parity = check_regressor_parity(model.booster_, onnx_bytes, parity_rows)
        (tmp / "um.onnx").write_bytes(onnx_bytes)
        (tmp / "um_lightgbm.txt").write_text(model.booster_.model_to_string())
        solver_curve(sweep).to_parquet(tmp / "heldout_curves.parquet", index=False)
        sweep.to_parquet(tmp / "heldout_nights.parquet", index=False)
        manifest = {"file": "um.onnx", "sha256": sha256(onnx_bytes), "features": model.features_,
                    "vocabulary": model.vocabulary_, "alpha": p.target_op, "target_op": p.target_op,
                    "offset": cal.offset_, "offsets": offsets, "as_of": as_of,
                    "train_vms": len(n.train), "calib_vms": len(n.calib), "onnx_parity_max_abs_diff": parity}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2))
        metrics["onnx_parity_max_abs_diff"] = parity
        plots_dir.mkdir(parents=True, exist_ok=True)
        curve.round(5).to_csv(plots_dir / "tradeoff.csv", index=False)
        nights.round(5).to_csv(plots_dir / "backtest.csv", index=False)
        _plot(curve, nights, p.target_op, plots_dir / "um_tradeoff.png")
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if np.isfinite(v)})
        mlflow.log_artifact(str(plots_dir / "um_tradeoff.png"))
        mlflow.onnx.log_model(onnx.load_from_string(onnx_bytes), name="um_onnx")
        mlflow.log_dict(manifest, "um_manifest.json")
        mlflow.lightgbm.log_model(model.booster_, name="um_lightgbm")
    write_json(metrics_path, {k: (round(v, 5) if isinstance(v, float) else v) for k, v in metrics.items()})
    print("train_um: " + ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
    return metrics


@contextmanager
def _rows(path: Path, days: tuple[date, date], columns: list[str], seed: int, client: Any
          ) -> Iterator[pd.DataFrame | WorkerRows]:
    """The nights' rows: read here, or spread over the Dask workers a day at a time (``models.um_dask``)."""
    if client is None:
        yield read_days(path, *days, columns=columns)
        return
    with worker_rows(client, path, *days, columns, seed) as rows:
        yield rows


def _plot(curve: pd.DataFrame, nights: pd.DataFrame, target: float, path: Path) -> None:
    plt = pyplot()

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for method, g in curve.groupby("method"):
        g = g.sort_values("um")
        a.plot(100 * g.op, 100 * g.um, marker="o" if method == "gbm" else None, ms=3, label=method)
    a.set(xlim=(0, 20), xlabel="overpredicted VMs (%)", ylabel="memory on zNUMA (% of GB)",
          title="Untouched memory (next day, Pond Fig. 18)")
    a.legend()
    x = pd.to_datetime(nights.as_of)
    b.plot(x, 100 * nights.op_raw, marker="o", label="raw quantile")
    b.plot(x, 100 * nights.op_calibrated, marker="s", label="calibrated")
    b.axhline(100 * target, ls=":", color="k", label="target")
    b.set(ylabel="realized OP on the next day (%)", title="Backtest: realized vs target")
    b.tick_params(axis="x", rotation=45)
    b.legend()
    save_figure(fig, path)
