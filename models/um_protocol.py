"""The nightly production protocol of the UM model: which VMs train, calibrate and get scored.

Night ``as_of`` (a date) ends at the following midnight ``T``. Known labels are those of VMs
deleted before ``T``; VMs created in the ``train_days`` before ``T`` train the model, except
``calib_days`` of creations ending ``calib_lag_days`` before ``T``, which are held out for
conformal calibration. The lag matters: among VMs created in the last day or two, only the
short-lived have ended, and short-lived VMs touch less memory, so calibrating on them would
under-state next-day overpredictions. The VMs created on the day after ``as_of`` are the ones
the service scores next, and the ones a backtest evaluates.

``known_by`` (the end of the as-of day, for the curves the solver reads) hides every outcome
observed later: a next-day VM still running then is *censored* and left out of the scores, and
counted (``Night.censored``), so nothing the solver reads depends on the future.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

import numpy as np
import pandas as pd

from pond.core.days import day_of, end_of
from pond.core.errors import ConfigError
from pond.core.params import UmParams
from pond.models.um import CUSTOMER_PREFIX, ConformalOffset, UntouchedModel


@dataclass
class Night:
    as_of: pd.Timestamp
    train: pd.DataFrame | Any    # or the workers' training rows (``models.um_dask.TrainRows``)
    calib: pd.DataFrame
    next_day: pd.DataFrame
    censored: int = 0            # next-day VMs whose outcome was not known by ``known_by``


def night(vm_features: pd.DataFrame | Any, as_of: str | pd.Timestamp, p: UmParams,
          known_by: pd.Timestamp | None = None) -> Night:
    """``vm_features``: a frame, or the rows Dask workers hold (``models.um_dask.WorkerRows``: its
    ``night`` splits them by the same ``roles``, and the training rows stay on the workers)."""
    end = end_of(as_of)
    if not isinstance(vm_features, pd.DataFrame):
        return vm_features.night(end, p, known_by)
    train, calib, scored, censored = roles(vm_features, end, p, known_by)
    return Night(end - pd.Timedelta(days=1), vm_features[train], vm_features[calib], vm_features[scored],
                 int(censored.sum()))


def roles(vm_features: pd.DataFrame, end: pd.Timestamp, p: UmParams, known_by: pd.Timestamp | None = None
          ) -> tuple[pd.Series, pd.Series, pd.Series, pd.Series]:
    """The night ending at ``end``'s masks: training, calibration, next-day VMs scored, next-day VMs censored."""
    created, deleted = vm_features["created_at"], vm_features["deleted_at"]
    known = deleted.notna() & (deleted < end) & vm_features["untouched_fraction"].notna()
    calib_end = end - pd.Timedelta(days=p.calib_lag_days)
    calib = known & (created >= calib_end - pd.Timedelta(days=p.calib_days)) & (created < calib_end)
    train = known & (created >= end - pd.Timedelta(days=p.train_days)) & ~calib
    day = (created >= end) & (created < end + pd.Timedelta(days=1))
    ended = vm_features["untouched_fraction"].notna()
    if known_by is not None:
        ended &= deleted.notna() & (deleted < known_by)
    return train, calib, day & ended, day & ~ended


OUTCOMES = ("created_at", "deleted_at", "untouched_fraction")   # what a night splits and scores by
REQUEST = ("vm_type", "os", "region", "cluster_id", "vcpus", "memory_gb")   # the model's inputs besides the customer's


def night_columns(names: list[str]) -> list[str]:
    """Of a VM-features file's columns, the ones the nights read: `train_um` reads no others (no ids,
    at fleet scale the largest columns)."""
    return [c for c in names if c in OUTCOMES or c in REQUEST or c.startswith(CUSTOMER_PREFIX)]


def creation_days(as_of: str | pd.Timestamp, p: UmParams) -> tuple[date, date]:
    """The first and last creation day that ``as_of``'s nights read (its backtest nights, the nightly
    model and the next day it is scored on), with a day's margin: `train_um` reads only these."""
    a = day_of(as_of)
    lag = max(p.calib_lag_days, curve_lag(p))
    return a - timedelta(days=lag + p.backtest_nights + p.train_days + 1), a + timedelta(days=1)


def usable(n: Night) -> bool:
    """A night the backtest can fit and score: VMs to train on, to calibrate on and to score."""
    return not (n.next_day.empty or n.train.empty or n.calib.empty)


def curve_lag(p: UmParams) -> int:
    """Days before ``as_of`` of the last next day the UM backtest scores (``curve_lag_days``, else the
    calibration's lag)."""
    return p.calib_lag_days if p.curve_lag_days is None else p.curve_lag_days


def backtest_nights(vm_features: pd.DataFrame, as_of: str | pd.Timestamp, p: UmParams) -> Iterator[Night]:
    """``as_of``'s UM backtest nights, oldest first: strictly before it (the last next day scored is
    ``curve_lag`` days before it; 0: the as-of day itself), with only the outcomes observed by the end of
    ``as_of``. A short lag shows the solver tonight's drift on the VMs that have already ended (most VMs end
    within a day of their creation); the VMs still running are censored and left out, as on every night."""
    known_by = end_of(as_of)
    last = pd.Timestamp(as_of) - pd.Timedelta(days=curve_lag(p) + 1)
    for k in range(p.backtest_nights - 1, -1, -1):
        yield night(vm_features, last - pd.Timedelta(days=k), p, known_by)


def usable_nights(vms: pd.DataFrame, as_of: str | pd.Timestamp, p: UmParams) -> int:
    """How many of ``as_of``'s UM backtest nights can be used: 0 means `train_um` stops. Reads only
    ``created_at``, ``deleted_at`` and ``untouched_fraction``."""
    return sum(map(usable, backtest_nights(vms, as_of, p)))


def fit_night(n: Night, alpha: float, target: float, seed: int, client: Any = None
              ) -> tuple[UntouchedModel, ConformalOffset]:
    """The night's model (on ``client``'s Dask workers when given) and its conformal offset."""
    return fit_night_scored(n, alpha, target, seed, client)[:2]


def fit_night_scored(n: Night, alpha: float, target: float, seed: int, client: Any = None
                     ) -> tuple[UntouchedModel, ConformalOffset, np.ndarray]:
    """``fit_night``'s model and offset, and the model's predictions on the calibration VMs the offset was fit on:
    callers that fit more offsets reuse them (at 16,000 VMs a day a prediction is a tenth of a second, and a
    backtest makes hundreds)."""
    if len(n.train) == 0:
        raise ConfigError(f"night {n.as_of.date()}: no VMs ended in the training window; "
                          "move base.as_of later or raise train_um.train_days")
    if client is None:
        model = _fit_local(n.train, alpha, seed)
    else:
        untouched = n.train["untouched_fraction"].to_numpy() if isinstance(n.train, pd.DataFrame) else None
        model = UntouchedModel(alpha=alpha, seed=seed, client=client).fit(n.train, untouched)
    calib_pred = model.predict(n.calib)
    offset = ConformalOffset(target).fit(calib_pred, n.calib["untouched_fraction"].to_numpy())
    return model, offset, calib_pred


_FITS: OrderedDict[str, UntouchedModel] = OrderedDict()   # the last models fit here, by what they learned from
_FITS_KEPT = 40


def _fit_local(train: pd.DataFrame, alpha: float, seed: int) -> UntouchedModel:
    """The model of these training rows, fit once: a night's training window is the same rows on every night that
    replays it (a backtest's nights share all but one of their UM backtest nights, and a night's final model is a
    later night's backtest night), and a fit depends on nothing else. The key is the rows' content, so a changed
    row or column is another fit; the models are only read after (``predict``)."""
    digest = hashlib.sha256(repr((alpha, seed, list(train.columns), list(map(str, train.dtypes)))).encode())
    digest.update(pd.util.hash_pandas_object(train, index=False).to_numpy().tobytes())
    key = digest.hexdigest()
    if key in _FITS:
        _FITS.move_to_end(key)
        return _FITS[key]
    model = UntouchedModel(alpha=alpha, seed=seed).fit(train, train["untouched_fraction"].to_numpy())
    _FITS[key] = model
    while len(_FITS) > _FITS_KEPT:
        _FITS.popitem(last=False)
    return model


def labels(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    return df["untouched_fraction"].to_numpy(float), df["memory_gb"].to_numpy(float)
