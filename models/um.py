"""Untouched-memory (UM) model: LightGBM quantile regression on VM metadata and customer history.

The label is the VM's untouched fraction over its lifetime; the prediction is a low quantile of
it, so that the zNUMA node sized from it is rarely touched. Categories (VM type, family, OS,
region, cluster) become integer codes from a vocabulary learned at fit time and are given to
LightGBM as native categoricals (unknown values -> NaN, LightGBM's missing branch); ONNX keeps
both. Split thresholds are rounded down to float32 after training so that LightGBM (float64
compares) and ONNX Runtime (float32 thresholds) take the same branch for every float32 input.
"""

from __future__ import annotations

import re

import lightgbm as lgb
import numpy as np
import pandas as pd

from telemetry.errors import ModelError

VM_TYPE_RE = r"^Standard_(?P<family>[A-Z]+)(?P<size>\d+)[a-z]*_v(?P<generation>\d+)$"
CATEGORICAL = ["vm_type", "family", "os", "region", "cluster_id"]
NUMERIC = ["vcpus", "memory_gb", "gb_per_vcpu", "generation"]
CUSTOMER = ["cust_n", "cust_p50", "cust_p80", "cust_p90", "cust_p95", "cust_p99"]
FEATURES = CATEGORICAL + NUMERIC + CUSTOMER


def metadata_frame(vms: pd.DataFrame) -> pd.DataFrame:
    """Model inputs derivable from a VM request plus its customer's percentiles (vectorized)."""
    parts = vms["vm_type"].astype("string").str.extract(VM_TYPE_RE)
    out = pd.DataFrame({
        "vm_type": vms["vm_type"].astype("string"), "family": parts["family"],
        "os": vms["os"].astype("string"), "region": vms["region"].astype("string"),
        "cluster_id": vms["cluster_id"].astype("string") if "cluster_id" in vms else pd.NA,
        "vcpus": vms["vcpus"].astype(float), "memory_gb": vms["memory_gb"].astype(float),
        "generation": pd.to_numeric(parts["generation"], errors="coerce").astype("float64"),
    }, index=vms.index)
    out["gb_per_vcpu"] = out["memory_gb"] / out["vcpus"]
    for c in CUSTOMER:
        out[c] = vms[c].astype(float) if c in vms else np.nan
    return out[FEATURES]


def fit_vocabulary(meta: pd.DataFrame) -> dict[str, list[str]]:
    return {c: sorted(meta[c].dropna().unique().tolist()) for c in CATEGORICAL}


def encode(meta: pd.DataFrame, vocab: dict[str, list[str]]) -> np.ndarray:
    """float32 matrix in FEATURES order; a category outside the vocabulary becomes NaN."""
    cols = []
    for c in FEATURES:
        if c in vocab:
            codes = pd.Index(vocab[c]).get_indexer(meta[c].astype(object)).astype(np.float32)
            codes[codes < 0] = np.nan  # unseen or missing
            cols.append(codes)
        else:
            cols.append(meta[c].to_numpy(np.float32))
    return np.column_stack(cols).astype(np.float32)


_THRESHOLD_LINE = re.compile(r"^threshold=(.*)$", re.MULTILINE)


def _round_down_f32(values: np.ndarray) -> np.ndarray:
    f = values.astype(np.float32)
    too_big = f.astype(np.float64) > values
    f[too_big] = np.nextafter(f[too_big], np.float32(-np.inf))
    return f


def float32_thresholds(booster: lgb.Booster) -> lgb.Booster:
    """The same model with every split threshold replaced by the largest float32 <= it."""
    text = booster.model_to_string()

    def fix(m: re.Match) -> str:
        vals = np.array(m.group(1).split(), dtype=np.float64)
        return "threshold=" + " ".join(repr(float(v)) for v in _round_down_f32(vals))

    text = _THRESHOLD_LINE.sub(fix, text)
    # tree_sizes= indexes trees by byte length, which the rewrite changed; it is optional.
    text = re.sub(r"^tree_sizes=.*\n", "", text, flags=re.MULTILINE)
    return lgb.Booster(model_str=text)


class UntouchedModel:
    """Quantile regressor of the untouched fraction; ``alpha`` is the nominal target quantile."""

    def __init__(self, alpha: float = 0.04, seed: int = 0) -> None:
        self.alpha = alpha
        self.seed = seed

    def fit(self, vms: pd.DataFrame, untouched: np.ndarray) -> "UntouchedModel":
        meta = metadata_frame(vms)
        self.vocabulary_ = fit_vocabulary(meta)
        X = encode(meta, self.vocabulary_)
        cat = [FEATURES.index(c) for c in CATEGORICAL]
        reg = lgb.LGBMRegressor(objective="quantile", alpha=self.alpha, random_state=self.seed,
                                n_jobs=2, verbose=-1)
        reg.fit(X, np.asarray(untouched, dtype=np.float64), feature_name=FEATURES, categorical_feature=cat)
        self.booster_ = float32_thresholds(reg.booster_)
        self.n_features_in_ = X.shape[1]
        return self

    def transform_input(self, vms: pd.DataFrame) -> np.ndarray:
        if not hasattr(self, "booster_"):
            raise ModelError("UntouchedModel is not fitted: call fit() or load a trained model")
        return encode(metadata_frame(vms), self.vocabulary_)

    def predict(self, vms: pd.DataFrame) -> np.ndarray:
        """Raw quantile prediction of the untouched fraction, clipped to [0, 1]."""
        return np.clip(self.booster_.predict(self.transform_input(vms)), 0.0, 1.0)


class ConformalOffset:
    """One-sided split-conformal shift so that P(untouched < prediction - offset) <= target.

    Scores are ``prediction - untouched`` on a calibration window the model did not see; the
    offset is their ceil((n+1)(1-target))-th smallest value. A model that overpredicts too often
    gets lowered (offset > 0); one that is needlessly cautious gets raised (offset < 0).
    """

    def __init__(self, target: float) -> None:
        self.target = target

    def fit(self, predicted: np.ndarray, untouched: np.ndarray) -> "ConformalOffset":
        scores = np.sort(np.asarray(predicted, float) - np.asarray(untouched, float))
        n = len(scores)
        if n == 0:
            raise ModelError("no calibration VMs: widen um.calib_days or check that VMs end in the window")
        k = int(np.ceil((n + 1) * (1.0 - self.target)))
        self.offset_ = float(scores[min(k, n) - 1])  # k > n (tiny target, few VMs): the largest score
        self.n_ = n
        return self

    def apply(self, predicted: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(predicted, float) - self.offset_, 0.0, 1.0)
