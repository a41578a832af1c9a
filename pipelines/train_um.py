"""Stage `train_um`: the nightly UM model (``models.um_train``: rolling backtest, Fig. 18 trade-off vs a static
fraction, raw quantile + conformal offsets, parity-checked ONNX export), its plots and an MLflow run.

The model folder (``um.onnx``, ``manifest.json``, the held-out curves) is ``models.um_train.TrainedUm.write``'s.

Nothing the solver reads depends on a VM created after ``base.as_of`` or an outcome observed
after it (``models.um_backtest.backtest``); the Fig. 18 trade-off on the day after ``as_of``
is a held-out figure for the report only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pandas as pd

from pond.core.cluster import session
from pond.core.errors import ConfigError
from pond.core.params import Params
from pond.core.plots import pyplot, save_figure
from pond.core.tracking import NIGHTLY, requirements, start_run
from pond.models.dask_fit import workers_of
from pond.models.um import customer_columns_of
from pond.models.um_protocol import creation_days, night_columns
from pond.models.um_train import rows_of, train
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import table_columns


def run(params: Params, features_dir: Path, out_dir: Path, metrics_path: Path,
        plots_dir: Path, client: Any = None, experiment: str = NIGHTLY, replay: bool = False) -> dict[str, Any]:
    """``client``: the caller's Dask client (`backtest` keeps one for all its nights); without it,
    ``engine.backend: dask`` starts a session for this stage. ``experiment``: where MLflow logs the run.
    ``replay``: a backtest's night, which keeps its models in its own folder only (no MLflow models) and neither
    measures nor draws the Fig. 18 trade-off (``models.um_train.train``'s ``figure``): nothing it decides reads them."""
    if client is None and params.engine.backend != "local":
        with session(params.engine) as own:
            return run(params, features_dir, out_dir, metrics_path, plots_dir, own, experiment, replay)
    p, seed, as_of = params.train_um, params.base.seed, params.base.as_of
    path = features_dir / "vm_features.parquet"
    columns = night_columns(table_columns(path))
    have, want = customer_columns_of(columns), params.features.customer_columns
    if have != want:
        raise ConfigError(f"{features_dir / 'vm_features.parquet'} has customer columns {have}, but "
                          f"features.percentiles gives {want}: the features stage ran with other params; "
                          "rerun it (`dvc repro`)")
    # the rows first: a table that cannot be read leaves no failed MLflow run behind
    logged = {"seed": seed, "as_of": as_of, **p.model_dump()}
    with rows_of(path, creation_days(as_of, p), columns, seed, client) as vf, \
            start_run("train_um", logged, default_experiment=experiment) as _, AtomicDir(out_dir) as tmp:
        import mlflow
        if client is not None:
            print(f"train_um: LightGBM on Dask (lightgbm.dask), {len(workers_of(client))} workers")
        um = train(vf, as_of, p, seed, client, figure=not replay)
        um.write(tmp)
        metrics = um.metrics
        plots_dir.mkdir(parents=True, exist_ok=True)
        um.nights.round(5).to_csv(plots_dir / "backtest.csv", index=False)
        mlflow.log_metrics({k: float(v) for k, v in metrics.items() if np.isfinite(v)})
        mlflow.log_dict(um.manifest, "um_manifest.json")
        if not replay:
            um.curve.round(5).to_csv(plots_dir / "tradeoff.csv", index=False)
            _plot(um.curve, um.nights, p.target_op, plots_dir / "um_tradeoff.png")
            mlflow.log_artifact(str(plots_dir / "um_tradeoff.png"))
            mlflow.onnx.log_model(onnx.load_from_string(um.onnx_bytes), name="um_onnx",
                                  pip_requirements=requirements("onnx", "onnxruntime"))
            mlflow.lightgbm.log_model(um.model.booster_, name="um_lightgbm", pip_requirements=requirements("lightgbm"))
    write_json(metrics_path, {k: (round(v, 5) if isinstance(v, float) else v) for k, v in metrics.items()})
    print("train_um: " + ", ".join(f"{k}={v:.4g}" for k, v in metrics.items()))
    return metrics


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
