"""LightGBM trained by its own distributed learner (``lightgbm.dask``) on a dask.distributed cluster.

Each worker holds one part of the rows and LightGBM's data-parallel learner merges their
histograms, so split finding sees every row. The quantile objective then sets each leaf's value
to the *mean of the workers' percentiles* of its residuals, not the percentile of all of them:
that is exact only when every part is a random sample of the rows. Rows here come in creation
order (a part would be a span of days), so they are shuffled first with the seed. Part ``k`` is
scattered to the ``k``-th worker, so that every worker trains on its share (left to itself, Dask
may compute small parts on one worker, and LightGBM then trains on one machine).

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
from typing import TYPE_CHECKING, Any

import numpy as np

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


def workers_of(client: Any) -> list[str]:
    return sorted(client.scheduler_info(n_workers=-1)["workers"])


def fit_regressor(client: Any, X: np.ndarray, y: np.ndarray, *, seed: int, feature_name: Sequence[str],
                  categorical_feature: Sequence[int], **params: Any) -> "lgb.Booster":
    """A ``LGBMRegressor(**params)`` booster trained on ``client``'s workers, one shuffled part each."""
    import dask.array as da
    import lightgbm as lgb
    from dask import delayed

    workers = workers_of(client)[:max(1, len(X))]   # never a worker without rows
    order = np.random.default_rng(seed).permutation(len(X))
    X, y = np.ascontiguousarray(X[order]), np.ascontiguousarray(np.asarray(y, float)[order])
    cut = np.linspace(0, len(X), len(workers) + 1).round().astype(int)
    xs, ys = [], []
    for w, a, b in zip(workers, cut[:-1], cut[1:]):
        fx, fy = client.scatter([X[a:b], y[a:b]], workers=[w], hash=False)
        xs.append(da.from_delayed(delayed(fx), shape=(b - a, X.shape[1]), dtype=X.dtype))
        ys.append(da.from_delayed(delayed(fy), shape=(b - a,), dtype=y.dtype))
    reg = lgb.DaskLGBMRegressor(client=InOrder(client), random_state=seed, verbose=-1, **params)
    reg.fit(da.concatenate(xs), da.concatenate(ys), feature_name=list(feature_name),
            categorical_feature=list(categorical_feature))
    return lgb.Booster(model_str=_RUN_ONLY.sub("", reg.to_local().booster_.model_to_string()))
