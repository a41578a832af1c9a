"""`pond compare A B`: two registered versions (number or alias) or bundle directories, side by side.

Prints the table (expected and realized shares, FP/OP, mispredictions, model sizes, per-VM
latency of the service's engine) and the snapshot drift; writes both and a plot of the two
bundles' trade-off curves to ``--out``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pond.core.errors import ConfigError, RegistryError
from pond.core.params import Params
from pond.core.plots import pyplot, save_figure
from pond.core.tracking import not_found, tracking_uri
from pond.evaluation import compare
from pond.models.bundle import BundlePaths, located
from pond.telemetry.atomic import AtomicDir
from pond.telemetry.request import FIELDS as REQUEST_FIELDS


def resolve(ref: str, model_name: str) -> tuple[str, Path]:
    """A bundle directory as is; otherwise a version number or alias of ``model_name`` in MLflow."""
    if Path(ref).is_dir():
        return ref, Path(ref)
    import mlflow
    from mlflow import MlflowClient

    mlflow.set_tracking_uri(tracking_uri())
    client = MlflowClient()
    try:
        mv = client.get_model_version(model_name, ref) if ref.isdigit() else client.get_model_version_by_alias(model_name, ref)
    except Exception as exc:
        if not not_found(exc):
            raise RegistryError(f"looking up {model_name}/{ref} at {tracking_uri()} failed ({type(exc).__name__}: "
                                f"{str(exc)[:300]}); check the registry") from exc
        raise ConfigError(f"no version or alias {ref!r} of registered model {model_name!r} at {tracking_uri()}; "
                          "list them in `mlflow ui` or pass a bundle directory") from None
    return f"{model_name}/v{mv.version}", located(Path(mlflow.artifacts.download_artifacts(artifact_uri=mv.source)))


def latency_us(bundle_dir: Path, calls: int = 1000) -> dict[str, float]:
    """The service's in-process time per VM (``allocate_one``, the UM model run every call, no cache),
    on the bundle's own sample requests."""
    from pond.serving.engine import Engine
    from pond.serving.offline import request_columns, time_one_by_one

    engine = Engine.load(BundlePaths.of(bundle_dir))
    req = pd.read_parquet(bundle_dir / "sample_requests.parquet").head(calls)
    cols = request_columns(req[list(REQUEST_FIELDS)])
    time_one_by_one(engine, request_columns(req.head(100)[list(REQUEST_FIELDS)]), None)  # warm
    a = np.array(time_one_by_one(engine, cols, None)[0]) * 1e6
    return {"per_vm_p50_us": round(float(np.percentile(a, 50)), 1), "per_vm_p99_us": round(float(np.percentile(a, 99)), 1)}


def run(params: Params, a_ref: str, b_ref: str, out_dir: Path, measure_latency: bool = True) -> pd.DataFrame:
    name = params.register.model_name
    (a_label, a_dir), (b_label, b_dir) = resolve(a_ref, name), resolve(b_ref, name)
    a, b = compare.summary(a_dir), compare.summary(b_dir)
    if measure_latency:
        a.update(latency_us(a_dir))
        b.update(latency_us(b_dir))
    table = compare.table(a, b).rename(columns={"A": a_label, "B": b_label})
    drift = compare.drift(a_dir, b_dir)
    with pd.option_context("display.width", 160, "display.float_format", "{:.4g}".format):
        print(table.to_string())
        print("\nsnapshot drift (PSI of B against A's deciles; two-sample KS):")
        print(drift.sort_values("psi", ascending=False).to_string(index=False))
    with AtomicDir(out_dir) as tmp:
        table.to_csv(tmp / "compare.csv")
        drift.to_csv(tmp / "drift.csv", index=False)
        _plot(compare.curves(a_dir), compare.curves(b_dir), a_label, b_label, tmp / "curves.png")
    return table


def _plot(a: tuple[pd.DataFrame, pd.DataFrame], b: tuple[pd.DataFrame, pd.DataFrame], a_label: str, b_label: str,
          path: Path) -> None:
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for (li, um), label, style in ((a, a_label, "-"), (b, b_label, "--")):
        left.plot(100 * li.fp, 100 * li.li, style, label=label)
        right.plot(100 * um.op, 100 * um.um, style, marker="o", label=label)
    left.set(xlabel="false positives (% of workloads)", ylabel="latency-insensitive (%)", title="LI vs FP (held out)",
             xlim=(0, 10))
    right.set(xlabel="overpredicted VMs (%)", ylabel="memory on zNUMA (%)", title="UM vs OP (backtest)")
    for ax in (left, right):
        ax.legend()
    save_figure(fig, path)
