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
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pond.core.errors import ConfigError, ModelError
from pond.telemetry import request
from pond.telemetry.vm_types import family_of, generation_of

if TYPE_CHECKING:
    import lightgbm as lgb

CATEGORICAL = ["vm_type", "family", "os", "region", "cluster_id"]
NUMERIC = ["vcpus", "memory_gb", "gb_per_vcpu", "generation"]
HEAD = CATEGORICAL + NUMERIC        # from the request itself; the customer columns follow
CUSTOMER_PREFIX = "cust_"           # cust_n, then one cust_p<q> per features.percentiles
NAN = float("nan")


def customer_columns_of(columns: Iterable[str] | pd.DataFrame) -> list[str]:
    """The customer-history columns the features stage wrote (features.customer.percentile_columns),
    of a frame's columns or of a table's."""
    return [c for c in columns if c.startswith(CUSTOMER_PREFIX)]


def _categories(cols: dict[str, Any]) -> dict[str, Any]:
    n = len(cols["vm_type"])
    return {"vm_type": cols["vm_type"], "family": map(family_of, cols["vm_type"]), "os": cols["os"],
            "region": cols["region"], "cluster_id": cols["cluster_id"] or repeat(None, n)}


def _distinct(column: pd.Series, as_request: Callable[[pd.Series], list]) -> tuple[np.ndarray, list]:
    """Each row's code into the column's distinct values, and those values as ``as_request`` turns a
    column into the request's (``telemetry.request``'s rules): conversion and look-ups then run
    once per distinct value, not per row (a fleet has millions of rows and a few hundred names)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    return codes, as_request(pd.Series(uniques, dtype=column.dtype))


def _frame_categories(vms: pd.DataFrame) -> dict[str, tuple[np.ndarray, list]]:
    """``_categories(request.columns_of(vms))`` as codes into distinct values (same values, same rows)."""
    text = {c: _distinct(vms[c], request.text_values) for c in ("vm_type", "os", "region")}
    codes, names = text["vm_type"]
    cluster = (_distinct(vms["cluster_id"], request.cluster_values)
               if "cluster_id" in vms.columns else (np.zeros(len(vms), np.intp), [None]))
    return {**text, "family": (codes, [family_of(n) for n in names]), "cluster_id": cluster}


def fit_vocabulary(vms: pd.DataFrame) -> dict[str, list[str]]:
    values = _frame_categories(vms)
    return {c: sorted({v for v in values[c][1] if v is not None}) for c in CATEGORICAL}


class UmEncoder:
    """Request fields -> UM model inputs: the one encoding training, evaluate and the service use.

    Categories become their index in the vocabulary learned at fit time (anything else, an
    unparsed VM type's family included, is NaN: LightGBM's missing branch); ``vm_type`` gives
    family and generation through ``telemetry.vm_types``. The service's request columns map through
    dicts (``head``: one VM costs microseconds); a frame of VMs (``encode``: training, evaluate) is
    coded once per distinct value, with the same bits, and holds no Python object per row.
    """

    def __init__(self, vocabulary: dict[str, list[str]], customer_columns: Sequence[str]) -> None:
        if not customer_columns or customer_columns[0] != f"{CUSTOMER_PREFIX}n":
            raise ModelError(f"UM customer columns {list(customer_columns)} must start with cust_n")
        self.vocabulary = vocabulary
        self.customer_columns = list(customer_columns)
        self.features = HEAD + self.customer_columns
        self.codes = {c: {v: float(i) for i, v in enumerate(vals)} for c, vals in vocabulary.items()}

    def head(self, cols: dict[str, Any]) -> np.ndarray:
        """float32 [n, len(HEAD)] from request columns (``telemetry.request.columns_of``)."""
        n = len(cols["vm_type"])
        values = _categories(cols)
        vcpus = np.asarray(cols["vcpus"], dtype=np.float64)
        mem = np.asarray(cols["memory_gb"], dtype=np.float64)
        numeric = {"vcpus": vcpus, "memory_gb": mem, "gb_per_vcpu": mem / vcpus,
                   "generation": np.fromiter(map(generation_of, cols["vm_type"]), dtype=np.float64, count=n)}
        parts = [np.fromiter(map(self.codes[c].get, values[c], repeat(NAN)), dtype=np.float64, count=n)
                 for c in CATEGORICAL] + [numeric[c] for c in NUMERIC]
        return np.stack(parts, axis=1).astype(np.float32) if n else np.zeros((0, len(HEAD)), np.float32)

    def head_row(self, vm_type: str, vcpus: float, memory_gb: float, os: str, region: str,
                 cluster_id: str | None) -> list[float]:
        """One request's ``head`` row as Python floats (the scheduler's single-VM path)."""
        codes = self.codes
        return [codes["vm_type"].get(vm_type, NAN), codes["family"].get(family_of(vm_type), NAN),
                codes["os"].get(os, NAN), codes["region"].get(region, NAN), codes["cluster_id"].get(cluster_id, NAN),
                vcpus, memory_gb, memory_gb / vcpus, generation_of(vm_type)]

    def encode(self, vms: pd.DataFrame) -> np.ndarray:
        """float32 matrix in ``features`` order for VMs with their customer columns (training, evaluate):
        ``head`` of the request columns, bit for bit, without a Python object per row."""
        missing = [c for c in self.customer_columns if c not in vms.columns]
        if missing:
            raise ConfigError(f"the UM model needs customer columns {missing}, which the VM features lack: "
                              "features.percentiles changed since the features stage ran; rerun `dvc repro`")
        out = np.empty((len(vms), len(self.features)), np.float32)
        cats = _frame_categories(vms)
        for i, c in enumerate(CATEGORICAL):
            codes, values = cats[c]
            out[:, i] = np.array([self.codes[c].get(v, NAN) for v in values], np.float64)[codes]
        codes, names = cats["vm_type"]
        vcpus = pd.to_numeric(vms["vcpus"]).to_numpy(np.float64)
        mem = pd.to_numeric(vms["memory_gb"]).to_numpy(np.float64)
        numeric = {"vcpus": vcpus, "memory_gb": mem, "gb_per_vcpu": mem / vcpus,
                   "generation": np.array([generation_of(n) for n in names], np.float64)[codes]}
        for i, c in enumerate(NUMERIC, start=len(CATEGORICAL)):
            out[:, i] = numeric[c]
        out[:, len(HEAD):] = vms[self.customer_columns].to_numpy(np.float32)
        return out


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
    import lightgbm as lgb  # training only: the service scores the ONNX export

    return lgb.Booster(model_str=text)


class UntouchedModel:
    """Quantile regressor of the untouched fraction; ``alpha`` is the nominal target quantile.

    The customer inputs are the ``cust_*`` columns of the VMs it is fit on, i.e. whatever
    ``features.percentiles`` made them; ``features_`` records them for export and serving.
    ``client``: a ``distributed.Client`` to train on its workers (``models.dask_fit``), or None.
    """

    def __init__(self, alpha: float = 0.04, seed: int = 0, client: Any = None) -> None:
        self.alpha = alpha
        self.seed = seed
        self.client = client

    def fit(self, vms: pd.DataFrame | Any, untouched: np.ndarray | None = None) -> UntouchedModel:
        """``vms``: a frame of VMs and their ``untouched`` fractions; or the rows Dask workers hold, labels
        included (``models.um_dask.TrainRows``), encoded and trained where they are."""
        on_workers = not isinstance(vms, pd.DataFrame)
        self.vocabulary_ = vms.vocabulary() if on_workers else fit_vocabulary(vms)
        self.encoder_ = UmEncoder(self.vocabulary_, vms.customer_columns if on_workers else customer_columns_of(vms))
        self.features_ = self.encoder_.features
        booster = (vms.fit(self.encoder_, seed=self.seed, objective="quantile", alpha=self.alpha) if on_workers
                   else self._fit_matrix(self.encoder_.encode(vms), np.asarray(untouched, dtype=np.float64)))
        self.booster_ = float32_thresholds(booster)
        self.n_features_in_ = len(self.features_)
        return self

    def _fit_matrix(self, X: np.ndarray, y: np.ndarray) -> Any:
        """The booster of an encoded matrix: on the client's workers, or in this process."""
        cat = [self.features_.index(c) for c in CATEGORICAL]
        if self.client is not None:
            from pond.models.dask_fit import fit_regressor

            return fit_regressor(self.client, X, y, seed=self.seed, feature_name=self.features_,
                                 categorical_feature=cat, objective="quantile", alpha=self.alpha)
        import lightgbm as lgb

        reg = lgb.LGBMRegressor(objective="quantile", alpha=self.alpha, random_state=self.seed, n_jobs=2, verbose=-1)
        return reg.fit(X, y, feature_name=self.features_, categorical_feature=cat).booster_

    def transform_input(self, vms: pd.DataFrame) -> np.ndarray:
        if not hasattr(self, "booster_"):
            raise ModelError("UntouchedModel is not fitted: call fit() or load a trained model")
        return self.encoder_.encode(vms)

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

    def fit(self, predicted: np.ndarray, untouched: np.ndarray) -> ConformalOffset:
        self.offset_ = float(conformal_offsets(predicted, untouched, [self.target])[0])
        self.n_ = len(predicted)
        return self

    def apply(self, predicted: np.ndarray) -> np.ndarray:
        return np.clip(np.asarray(predicted, float) - self.offset_, 0.0, 1.0)


def conformal_offsets(predicted: np.ndarray, untouched: np.ndarray, targets: Any) -> np.ndarray:
    """``ConformalOffset``'s offset for each target from one sort of the scores (a UM backtest night fits one per
    target of the solver's grid)."""
    scores = np.sort(np.asarray(predicted, float) - np.asarray(untouched, float))
    n = len(scores)
    if n == 0:
        raise ModelError("no calibration VMs: widen train_um.calib_days or check that VMs end in the window")
    k = np.ceil((n + 1) * (1.0 - np.asarray(targets, float))).astype(int)
    return scores[np.minimum(k, n) - 1]        # k > n (tiny target, few VMs): the largest score
