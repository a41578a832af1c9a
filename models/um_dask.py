"""`train_um`'s rows held by the Dask workers, so that the stage's process never holds its days.

The process reads the VM features one creation day at a time and sends each row to a worker drawn
at random (seeded by ``base.seed`` and the day): every worker's share is a random sample of every
day, which is what LightGBM's distributed quantile leaves need (``models.dask_fit``). A night then
splits each worker's share by the local protocol's ``roles``: the training rows stay there and are
encoded there, with the vocabulary of all of them; the calibration and next-day VMs (four days of
the 21-odd) come back to the process, which scores them as the local engine does.

Not the local engine's model: LightGBM's learner bins and merges per worker; the held-out UM at OP 4% stays within 0.5
points of the local engine's (``tests/model/test_engine_parity.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from operator import getitem
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from pond.core.params import UmParams
from pond.models.dask_fit import Part, fit_parts, workers_of
from pond.models.um import CATEGORICAL, UmEncoder, customer_columns_of, fit_vocabulary
from pond.models.um_protocol import Night, roles
from pond.telemetry.io import read_days

if TYPE_CHECKING:
    import lightgbm as lgb

PARITY_ROWS = 100_000      # training rows per worker that the ONNX parity check compares, at most


def _split(rows: list[pd.DataFrame], end: pd.Timestamp, p: UmParams, known_by: pd.Timestamp | None
           ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]:
    """One worker's share of a night: (training rows, calibration rows, next-day rows scored, censored)."""
    share = pd.concat(rows, ignore_index=True)
    train, calib, scored, censored = roles(share, end, p, known_by)
    return share[train], share[calib], share[scored], int(censored.sum())


def _encode(train: pd.DataFrame, encoder: UmEncoder) -> tuple[np.ndarray, np.ndarray]:
    return encoder.encode(train), train["untouched_fraction"].to_numpy(np.float64)


def _sample(X: np.ndarray, k: int, seed: int) -> np.ndarray:
    if len(X) <= k:
        return X
    return X[np.sort(np.random.default_rng(seed).choice(len(X), k, replace=False))]


class TrainRows:
    """A night's training rows, held by the workers (one share each): what ``UntouchedModel.fit`` reads."""

    def __init__(self, client: Any, shares: list[tuple[str, Any, int]], customer_columns: list[str]) -> None:
        self.client = client
        self.shares = shares                       # (worker, future of its rows, how many)
        self.customer_columns = customer_columns
        self._encoded: tuple[dict, list[Part]] | None = None

    def __len__(self) -> int:
        return sum(n for _, _, n in self.shares)

    @property
    def empty(self) -> bool:
        return len(self) == 0

    def vocabulary(self) -> dict[str, list[str]]:
        """``fit_vocabulary`` of all the rows: the union of the workers' (sorted, as it sorts)."""
        futures = [self.client.submit(fit_vocabulary, f, workers=[w], pure=False) for w, f, n in self.shares if n]
        parts = self.client.gather(futures)
        return {c: sorted(set().union(*(v[c] for v in parts))) for c in CATEGORICAL}

    def parts(self, encoder: UmEncoder) -> list[Part]:
        """The rows encoded where they are, once per vocabulary (the trade-off fits one night ten times)."""
        if self._encoded is None or self._encoded[0] != encoder.vocabulary:
            parts = []
            for w, f, n in self.shares:
                xy = self.client.submit(_encode, f, encoder, workers=[w], pure=False)
                X, y = (self.client.submit(getitem, xy, i, workers=[w]) for i in (0, 1))
                parts.append(Part(X, y, rows=n, columns=len(encoder.features)))
            self._encoded = (encoder.vocabulary, parts)
        return self._encoded[1]

    def fit(self, encoder: UmEncoder, *, seed: int, **params: Any) -> lgb.Booster:
        """A booster trained where the rows are (``models.dask_fit.fit_parts``)."""
        return fit_parts(self.client, self.parts(encoder), seed=seed, feature_name=encoder.features,
                         categorical_feature=[encoder.features.index(c) for c in CATEGORICAL], **params)

    def sample(self, encoder: UmEncoder, seed: int, per_worker: int = PARITY_ROWS) -> np.ndarray:
        """Up to ``per_worker`` encoded rows of each worker's share, drawn with ``seed``: the rows the ONNX
        export is checked on, where the local engine uses every training row."""
        futures = [self.client.submit(_sample, p.X, per_worker, seed, workers=[w], pure=False)
                   for (w, _, _), p in zip(self.shares, self.parts(encoder))]
        return np.vstack(self.client.gather(futures))


class WorkerRows:
    """The VM-features rows of a span of creation days, spread over the workers: ``um_protocol.night``
    of it gives a ``Night`` whose training rows are a ``TrainRows``."""

    def __init__(self, client: Any, days: dict[str, list[tuple[date, Any]]], customer_columns: list[str]) -> None:
        self.client = client
        self.days = days                           # worker -> (day, future of its rows of that day)
        self.customer_columns = customer_columns

    def night(self, end: pd.Timestamp, p: UmParams, known_by: pd.Timestamp | None) -> Night:
        first, last = (end - pd.Timedelta(days=p.train_days)).date(), end.date()
        split = {w: self.client.submit(_split, [f for day, f in futures if first <= day <= last], end, p, known_by,
                                       workers=[w], pure=False) for w, futures in self.days.items()}
        returned = self.client.gather([self.client.submit(_returned, f, workers=[w], pure=False)
                                       for w, f in split.items()])
        shares = [(w, self.client.submit(getitem, f, 0, workers=[w]), n) for (w, f), (n, _, _, _)
                  in zip(split.items(), returned)]
        return Night(end - pd.Timedelta(days=1), TrainRows(self.client, shares, self.customer_columns),
                     pd.concat([c for _, c, _, _ in returned], ignore_index=True),
                     pd.concat([s for _, _, s, _ in returned], ignore_index=True), sum(k for *_, k in returned))


def _returned(split: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, int]
              ) -> tuple[int, pd.DataFrame, pd.DataFrame, int]:
    """What of a worker's night comes back to the process: how many training rows, and the rest."""
    train, calib, scored, censored = split
    return len(train), calib, scored, censored


@contextmanager
def worker_rows(client: Any, path: Path, first: date, last: date, columns: list[str], seed: int
                ) -> Iterator[WorkerRows]:
    """``path``'s rows created from ``first`` to ``last`` in ``columns``, sent to the workers a day at a
    time (the process holds one day); the workers let go of them when the block ends."""
    workers = workers_of(client)
    days: dict[str, list[tuple[date, Any]]] = {w: [] for w in workers}
    held: list[Any] = []
    try:
        day = first
        while day <= last:
            rows = read_days(path, day, day, columns=columns)
            to = np.random.default_rng([seed, day.toordinal()]).integers(len(workers), size=len(rows))
            for k, w in enumerate(workers):
                [f] = client.scatter([rows[to == k].reset_index(drop=True)], workers=[w], hash=False)
                days[w].append((day, f))
                held.append(f)
            day += timedelta(days=1)
        yield WorkerRows(client, days, customer_columns_of(columns))
    finally:   # let go of the client's references (cancelling scattered data trips the scheduler's checks)
        for f in held:
            f.release()
