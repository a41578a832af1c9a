"""The monitor's model as the service and the replay load it: a verified ONNX session, its features in order, and
the flag threshold of each latency ratio it was judged at (``train_monitor``'s manifest)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd

from pond.core.errors import ModelError
from pond.models.inference import load_verified
from pond.models.monitor_features import LATENCY_RATIO, POOL_SHARE, monitor_features
from pond.models.runtime import onnx_p_insensitive

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class MonitorModel:
    session: ort.InferenceSession
    features: list[str]
    classes: list[int]
    thresholds: dict[float, float]     # latency ratio -> flag at P(exceeds the PDM) >= this
    pdm: float
    sha256: str

    @classmethod
    def load(cls, directory: Path | None) -> "MonitorModel | None":
        """None where there is no monitor (no folder, or a lab without spill runs: the manifest says so)."""
        if directory is None or not (Path(directory) / MANIFEST).exists():
            return None
        entry = json.loads((Path(directory) / MANIFEST).read_text()).get("monitor")
        if not entry:
            return None
        missing = [f for f in (POOL_SHARE, LATENCY_RATIO) if f not in entry["features"]]
        if missing:
            raise ModelError(f"{directory / MANIFEST}: the monitor's features lack {missing}; rerun `dvc repro`")
        return cls(session=load_verified(Path(directory) / entry["file"], entry["sha256"]),
                   features=list(entry["features"]), classes=[int(c) for c in entry["classes"]],
                   thresholds={float(k): float(v) for k, v in entry["thresholds"].items()},
                   pdm=float(entry["pdm"]), sha256=entry["sha256"])

    def threshold(self, latency_ratio: float) -> float:
        """The threshold of the judged ratio nearest ``latency_ratio`` (a pool latency it was not judged at)."""
        nearest = min(self.thresholds, key=lambda r: (abs(r - latency_ratio), r))
        return self.thresholds[nearest]

    def p_exceeds(self, counts: pd.DataFrame, events: list[str], pool_share: np.ndarray,
                  latency_ratio: np.ndarray) -> np.ndarray:
        """P(the run exceeds the PDM) of each row of raw counts, counted under its allocation."""
        f = monitor_features(counts, events, pool_share, latency_ratio, table="counters")
        X = f.reindex(columns=self.features).to_numpy(np.float32)
        # class 1 is "exceeds the PDM" here; the helper reads the probability of class 1
        return onnx_p_insensitive(self.session, X, self.classes)
