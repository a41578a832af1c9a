"""One night's deployable bundle: what the service loads and what the registry versions.

Layout (a directory, or an MLflow model version's artifacts)::

    policy.json                      thresholds, offsets, both model sha256s
    li/<model>.onnx, li/manifest.json, li/heldout_curves.parquet
    um/um.onnx, um/manifest.json, um/heldout_curves.parquet
    snapshot/{customer_percentiles,workload_history,request_shapes}.parquet, snapshot/manifest.json
    monitor/monitor.onnx, monitor/manifest.json   the QoS monitor's model (absent: its lab had no spill runs)
    metrics/<stage>.json             the night's metrics (what `compare` and the gate read)
    sample_requests.parquet          request columns of the evaluation day's VMs (no labels)
    bundle.json                      as-of day, data window, sha256 of every file above
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from pond.core.errors import ModelError
from pond.models.policy import read_policy
from pond.telemetry import request
from pond.telemetry.atomic import sha256_file

SAMPLE_REQUESTS = 2000


@dataclass(frozen=True)
class BundlePaths:
    policy: Path
    li_dir: Path
    um_dir: Path
    snapshot_dir: Path
    monitor_dir: Path | None = None     # None, or a folder without a model: /v1/qos falls back to the LI model

    @classmethod
    def of(cls, bundle_dir: Path) -> BundlePaths:
        d = Path(bundle_dir)
        return cls(d / "policy.json", d / "li", d / "um", d / "snapshot", d / "monitor")


def assemble(dst: Path, paths: BundlePaths, metrics: dict[str, Path], requests: pd.DataFrame,
             window: dict[str, Any]) -> dict[str, Any]:
    """Copy the night's serving inputs into ``dst`` (a fresh directory); return bundle.json's content."""
    policy = read_policy(paths.policy)
    (dst / "li").mkdir(parents=True)
    (dst / "um").mkdir()
    (dst / "metrics").mkdir()
    shutil.copy2(paths.policy, dst / "policy.json")
    for name in (policy.li.model, "manifest.json", "heldout_curves.parquet"):
        shutil.copy2(paths.li_dir / name, dst / "li" / name)
    for name in (policy.um.model, "manifest.json", "heldout_curves.parquet"):
        shutil.copy2(paths.um_dir / name, dst / "um" / name)
    shutil.copytree(paths.snapshot_dir, dst / "snapshot")
    monitor = _monitor_entry(paths.monitor_dir)
    if monitor:
        (dst / "monitor").mkdir()
        for name in (monitor["file"], "manifest.json"):
            shutil.copy2(paths.monitor_dir / name, dst / "monitor" / name)
    for stage, path in metrics.items():
        if path.exists():
            shutil.copy2(path, dst / "metrics" / f"{stage}.json")
    requests[list(request.FIELDS)].head(SAMPLE_REQUESTS).to_parquet(dst / "sample_requests.parquet",
                                                                               index=False)
    files = sorted(p for p in dst.rglob("*") if p.is_file())
    info = {"as_of": policy.as_of, "window": window, "li_sha256": policy.li.sha256,
            "um_sha256": policy.um.sha256, "monitor_sha256": monitor["sha256"] if monitor else None,
            "features": {"li": policy.li.features,
                                                             "um": json.loads((paths.um_dir / "manifest.json").read_text())["features"]},
            "files": {str(p.relative_to(dst)): sha256_file(p) for p in files}}
    (dst / "bundle.json").write_text(json.dumps(info, indent=2, sort_keys=True))
    return info


def _monitor_entry(monitor_dir: Path | None) -> dict[str, Any] | None:
    """``train_monitor``'s manifest entry; None without a monitor model."""
    manifest = None if monitor_dir is None else Path(monitor_dir) / "manifest.json"
    return json.loads(manifest.read_text()).get("monitor") if manifest is not None and manifest.exists() else None


def verify(bundle_dir: Path) -> dict[str, Any]:
    """bundle.json, with every listed file checked against its sha256."""
    info_path = Path(bundle_dir) / "bundle.json"
    if not info_path.exists():
        raise ModelError(f"{bundle_dir} is not a bundle (no bundle.json); register one with `pond register`")
    info = json.loads(info_path.read_text())
    bad = [name for name, digest in info["files"].items()
           if not (Path(bundle_dir) / name).exists() or sha256_file(Path(bundle_dir) / name) != digest]
    if bad:
        raise ModelError(f"bundle {bundle_dir}: files missing or altered: {bad[:5]}; re-download or re-register it")
    return info


def located(downloaded: Path) -> Path:
    """The bundle inside a registered version's download: a version logged as an MLflow model keeps it where its
    MLmodel's python_function flavor says (``data/bundle``); older versions are the bundle itself."""
    mlmodel = Path(downloaded) / "MLmodel"
    if not mlmodel.exists():
        return Path(downloaded)
    data = (yaml.safe_load(mlmodel.read_text()).get("flavors", {}).get("python_function", {}).get("data"))
    inside = (Path(downloaded) / str(data or ".")).resolve()
    if not inside.is_relative_to(Path(downloaded).resolve()):
        raise ModelError(f"{mlmodel}: the bundle path {data!r} leaves the version's directory; re-register it")
    return inside


def metrics(bundle_dir: Path, stage: str) -> dict[str, Any]:
    path = Path(bundle_dir) / "metrics" / f"{stage}.json"
    return json.loads(path.read_text()) if path.exists() else {}
