"""Stage `register`: the night's bundle (``--out``, also a DVC output the service can load) becomes a new version of
one MLflow registered model. The promotion gate (``evaluation.gate``) compares it with the current `champion` on the
candidate's evaluation day, each bundle with its own models, policy and snapshot (``evaluation.registry.champion_on``).
Promoted: alias `champion` (the one the service follows); otherwise `challenger`; the reason is a tag either way."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from pond.core.days import next_day
from pond.core.errors import ConfigError, RegistryError
from pond.core.params import Params
from pond.core.tracking import NIGHT_RUN_TAG, not_found, start_run
from pond.evaluation.gate import gate
from pond.evaluation.registry import CHAMPION, Verdict, champion_on, close_night, record, version_tags
from pond.models import bundle
from pond.models.bundle import BundlePaths
from pond.models.policy import read_policy
from pond.serving import pyfunc
from pond.telemetry.atomic import AtomicDir, write_json
from pond.telemetry.io import read_days
from pond.telemetry.storage import Location

NIGHT_METRICS = ("features", "train_li", "train_monitor", "train_um", "optimize", "evaluate", "backtest", "simulate")


def _registry(what: str, call: Any, *args: Any) -> Any | None:
    """``call(*args)``; None when the registry says the thing does not exist (the first night).
    Any other failure stops `register` before anything is promoted: the gate fails closed."""
    try:
        return call(*args)
    except Exception as exc:
        if not_found(exc):
            return None
        raise RegistryError(f"{what} failed ({type(exc).__name__}: {str(exc)[:300]}); nothing was registered or "
                            "promoted. Fix: check MLFLOW_TRACKING_URI and the registry, then rerun `dvc repro`") from exc


def run(params: Params, paths: BundlePaths, features_dir: Path, raw_dir: Location, metrics_dir: Path,
        bundle_dir: Path, out_metrics: Path) -> dict[str, Any]:
    gp = params.register
    policy = read_policy(paths.policy)
    evaluation = json.loads((metrics_dir / "evaluate.json").read_text())
    if evaluation.get("day") != str(next_day(policy.as_of)):
        raise ConfigError(f"{metrics_dir / 'evaluate.json'} is not the evaluation of this policy "
                          f"(as-of {policy.as_of}): run `dvc repro` so evaluate runs first")
    day = pd.Timestamp(evaluation["day"]).date()
    if "served" not in evaluation:
        raise ConfigError(f"{metrics_dir / 'evaluate.json'} has no row 'served' (written before optimize.serve): "
                          "run `dvc repro` so evaluate runs again")
    day_vms = read_days(features_dir / "vm_features.parquet", day, day)
    candidate = {**evaluation["served"], "served_policy": evaluation["served_policy"]}
    window = {"as_of": policy.as_of, "evaluation_day": evaluation["day"],
              "train_um_days": params.train_um.train_days, "history_days": params.features.history_days}
    with AtomicDir(bundle_dir) as dst, start_run("register", {"model_name": gp.model_name,
                                                             "as_of": policy.as_of}) as run_:
        import mlflow
        from mlflow import MlflowClient

        client = MlflowClient()
        champ_version = _registry(f"looking up {gp.model_name}@{CHAMPION}", client.get_model_version_by_alias,
                                  gp.model_name, CHAMPION)
        champ, unreadable = None, None
        if champ_version is not None:
            champ_dir = bundle.located(Path(mlflow.artifacts.download_artifacts(artifact_uri=champ_version.source)))
            bundle.verify(champ_dir)
            champ, unreadable = champion_on(champ_dir, day_vms, raw_dir, params.qos)
        verdict = Verdict(*gate(candidate, champ, policy.misprediction_budget, gp, unreadable),
                          None if champ_version is None else str(champ_version.version))
        info = bundle.assemble(dst, paths, {s: metrics_dir / f"{s}.json" for s in NIGHT_METRICS}, day_vms, window)
        model = pyfunc.log(dst)
        mlflow.log_metrics({"realized.mispredictions": candidate["mispredictions_conservative"],
                            "realized.mispredictions_unmitigated": candidate["mispredictions_unmitigated"],
                            "realized.pool_share": candidate["pool_share"], "promoted": float(verdict.promote)})
        if _registry(f"looking up {gp.model_name}", client.get_registered_model, gp.model_name) is None:
            client.create_registered_model(gp.model_name, description="Pond zNUMA sizing bundle (policy, LI + UM "
                                                                      "ONNX models, feature snapshot)")
        night = run_.data.tags[NIGHT_RUN_TAG]
        mv = record(client, gp.model_name, model, night,
                    version_tags(policy, evaluation["day"], candidate, info, verdict), verdict)
        mlflow.set_tags({"registered_version": mv.version, "gate.decision": verdict.alias,
                         "gate.reason": verdict.reason})
        close_night(client, night, dst, policy, str(mv.version), verdict)
    promote, reason = verdict.promote, verdict.reason
    metrics = {"model_name": gp.model_name, "as_of": policy.as_of, "promoted": promote,
               "candidate": {k: candidate[k] for k in ("pool_share", "mispredictions_conservative")},
               "champion_on_same_vms": None if champ is None else
               {k: champ[k] for k in ("pool_share", "mispredictions_conservative")}}
    write_json(out_metrics, metrics)
    print(f"register: {gp.model_name} version {mv.version} -> {verdict.alias}: {reason}")
    return {**metrics, "version": int(mv.version)}
