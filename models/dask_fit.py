"""LightGBM trained by its own distributed learner (``lightgbm.dask``) on a dask.distributed cluster.

Each worker holds one part of the rows and LightGBM's data-parallel learner merges their
histograms, so split finding sees every row. The quantile objective then sets each leaf's value
to the *mean of the workers' percentiles* of its residuals, not the percentile of all of them:
that is exact only when every part is a random sample of the rows. Rows come in creation order
(a part would be a span of days): ``fit_regressor`` shuffles a matrix it is given with the seed and
scatters part ``k`` to the ``k``-th worker, so that every worker trains on its share (left to
itself, Dask may compute small parts on one worker, and LightGBM then trains on one machine);
`train_um` sends each row to a random worker as it reads it (``models.um_dask``), and its parts
are trained where they are (``fit_parts``).

Bit-reproducible for a given number of workers. LightGBM ranks its machines in the order
``Client.who_has`` lists the parts' keys, which comes from a set (so from the keys' hashes, which
change with every run), and each rank bins its own features from its own rows: left alone, two
runs on the same data bin differently and grow different trees. The client LightGBM is given
lists them in the parts' order, so part ``k`` is always rank ``k``'s. The run's ports and hosts
(``local_listen_port``, ``machines``) are dropped from the model text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pond.core.errors import ConfigError

if TYPE_CHECKING:
    import lightgbm as lgb

_RUN_ONLY = re.compile(r"^\[(?:local_listen_port|machines|num_machines|num_threads|time_out): .*\]\n", re.MULTILINE)


class InOrder:
    """``client``, whose ``who_has`` lists the futures' keys in the order they were given."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def who_has(self, futures: Any = None, **kwargs: Any) -> dict[Any, Any]:
        got = self.client.who_has(futures, **kwargs)
        if futures is None:
            return got
        return {k: got[k] for k in dict.fromkeys(f.key for f in self.client.futures_of(futures))}


def workers_of(client: Any, timeout: float = 60) -> list[str]:
    """The cluster's workers, sorted. With none registered (a worker restarting, a cluster still starting) it waits
    up to ``timeout`` s for one instead of fitting on nobody."""
    names = sorted(client.scheduler_info(n_workers=-1)["workers"])
    if not names:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError as exc:
            raise ConfigError(f"the Dask scheduler has had no worker for {timeout:g} s: start workers against it "
                              "(`dask worker <scheduler address>`) or run with engine.backend: local") from exc
        names = sorted(client.scheduler_info(n_workers=-1)["workers"])
    return names


def fit_regressor(client: Any, X: np.ndarray, y: np.ndarray, *, seed: int, feature_name: Sequence[str],
                  categorical_feature: Sequence[int], **params: Any) -> lgb.Booster:
    """A ``LGBMRegressor(**params)`` booster trained on ``client``'s workers, one shuffled part each."""
    workers = workers_of(client)[:max(1, len(X))]   # never a worker without rows
    order = np.random.default_rng(seed).permutation(len(X))
    X, y = np.ascontiguousarray(X[order]), np.ascontiguousarray(np.asarray(y, float)[order])
    cut = np.linspace(0, len(X), len(workers) + 1).round().astype(int)
    parts = [Part(*client.scatter([X[a:b], y[a:b]], workers=[w], hash=False), rows=b - a, columns=X.shape[1],
                  dtype=X.dtype)
             for w, a, b in zip(workers, cut[:-1], cut[1:])]
    return fit_parts(client, parts, seed=seed, feature_name=feature_name, categorical_feature=categorical_feature,
                     **params)


@dataclass(frozen=True)
class Part:
    """One worker's rows: futures of a matrix and its float64 labels, held by that worker."""
    X: Any
    y: Any
    rows: int
    columns: int
    dtype: Any = np.float32


def fit_parts(client: Any, parts: Sequence[Part], *, seed: int, feature_name: Sequence[str],
              categorical_feature: Sequence[int], **params: Any) -> lgb.Booster:
    """A ``LGBMRegressor(**params)`` booster trained where ``parts`` are, part ``k`` on rank ``k``
    (each part a random sample of the rows: see the module's docstring). Parts without rows are left out."""
    import dask.array as da
    import lightgbm as lgb
    from dask import delayed

    parts = [p for p in parts if p.rows] or list(parts[:1])
    xs = [da.from_delayed(delayed(p.X), shape=(p.rows, p.columns), dtype=p.dtype) for p in parts]
    ys = [da.from_delayed(delayed(p.y), shape=(p.rows,), dtype=np.float64) for p in parts]
    reg = lgb.DaskLGBMRegressor(client=InOrder(client), random_state=seed, verbose=-1, **params)
    reg.fit(da.concatenate(xs), da.concatenate(ys), feature_name=list(feature_name),
            categorical_feature=list(categorical_feature))
    return lgb.Booster(model_str=_RUN_ONLY.sub("", reg.to_local().booster_.model_to_string()))
