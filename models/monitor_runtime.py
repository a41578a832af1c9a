"""The monitor's model as the service and the replay load it: a verified ONNX session, its features in order, and
the flag threshold of each latency ratio it was judged at (``train_monitor``'s manifest)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd

from pond.core.errors import ContractError, ModelError
from pond.models.inference import load_verified
from pond.models.monitor_features import LATENCY_RATIO, POOL_SHARE, POOL_STALLS, StallRule, either, monitor_features
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
    full_pool: dict[float, dict[str, int]] = field(default_factory=dict)   # held-out flags, all on the pool
    events: list[str] | None = None    # the PMU events its features read; None: every event the lab counts
    workload_flags: dict[float, dict[str, float]] = field(default_factory=dict)  # held-out, per workload, all on pool
    whole_pool: dict[float, float] = field(default_factory=dict)   # latency ratio -> threshold of a VM all on the pool
    stall_rule: StallRule | None = None   # scored beside the forest, the larger P kept (``models.monitor.either``)

    @classmethod
    def load(cls, directory: Path | None) -> MonitorModel | None:
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
                   pdm=float(entry["pdm"]), sha256=entry["sha256"],
                   full_pool={float(k): {n: int(c) for n, c in v.items()}
                              for k, v in entry.get("full_pool", {}).items()},
                   events=list(entry["events"]) if entry.get("events") else None,
                   workload_flags={float(k): {str(w): float(f) for w, f in v.items()}
                                   for k, v in entry.get("full_pool_workloads", {}).items()},
                   whole_pool={float(k): float(v) for k, v in (entry.get("whole_pool_thresholds") or {}).items()},
                   stall_rule=StallRule(float(rule["coef"]), float(rule["intercept"]))
                   if (rule := entry.get("stall_rule")) else None)

    def threshold(self, latency_ratio: float, whole: bool = False) -> float:
        """The threshold of the judged ratio nearest ``latency_ratio`` (a pool latency it was not judged at). With
        ``whole``, for a VM all on the pool (an insensitive call): the one set on the lab's runs all on the pool of
        the workloads the LI model calls (``train_monitor.call_level``), where the model has one."""
        by_ratio = self.whole_pool if whole and self.whole_pool else self.thresholds
        return by_ratio[_nearest(by_ratio, latency_ratio)]

    def full_pool_counts(self, latency_ratio: float) -> dict[str, int] | None:
        """The held-out flags of the lab's runs all on the pool at the judged ratio nearest ``latency_ratio``
        (``monitor_train.full_pool_counts``); None for a model trained before they were kept."""
        return self.full_pool[_nearest(self.full_pool, latency_ratio)] if self.full_pool else None

    def flag_shares(self, latency_ratio: float) -> pd.Series | None:
        """Each lab workload's share of its runs all on the pool that the held-out monitor flags, at the judged ratio
        nearest ``latency_ratio`` (``monitor_train.workload_flags``); None for a model trained before they were
        kept."""
        if not self.workload_flags:
            return None
        return pd.Series(self.workload_flags[_nearest(self.workload_flags, latency_ratio)], dtype=float)

    def needs(self, events: list[str]) -> list[str]:
        """The events the model reads, of counts that carry ``events`` (all of them, for a model that reads every
        event the lab counts)."""
        return list(events) if self.events is None else self.events

    def p_exceeds(self, counts: pd.DataFrame, events: list[str], pool_share: np.ndarray,
                  latency_ratio: np.ndarray, table: str = "counters") -> np.ndarray:
        """P(the run exceeds the PDM) of each row of raw counts, counted under its allocation."""
        read = self.needs(events)
        missing = [e for e in read if e not in counts.columns]
        if missing:
            raise ContractError(table, f"the QoS monitor's model reads {len(read)} events; {len(missing)} are not "
                                f"counted here", column=missing[0],
                                fix="count the events of train_monitor.events, or retrain the monitor on those counted")
        f = monitor_features(counts, read, pool_share, latency_ratio)
        X = f.reindex(columns=self.features).to_numpy(np.float32)
        # class 1 is "exceeds the PDM" here; the helper reads the probability of class 1
        forest = onnx_p_insensitive(self.session, X, self.classes)
        return either(forest, self.stall_rule, f[POOL_STALLS].to_numpy(np.float64))


def _nearest(by_ratio: dict[float, object], latency_ratio: float) -> float:
    return min(by_ratio, key=lambda r: (abs(r - latency_ratio), r))
