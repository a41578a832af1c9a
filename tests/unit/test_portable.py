"""The generator's exp, log and power: numpy's to within a unit in the last place, and the same bits
whichever SIMD kernels numpy would pick (dvc.lock's data/raw differed between machines)."""

from __future__ import annotations

import numpy as np

from pond.telemetry.fleet import portable


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a - b) / np.spacing(np.abs(b))


def test_exp_and_log_agree_with_numpy_to_an_ulp():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 3, 200_000), rng.uniform(-700, 700, 20_000)])
    assert _ulps(portable.exp(x), np.exp(x)).max() <= 1.0
    y = np.abs(rng.normal(0, 3, 200_000)) * 10.0 ** rng.uniform(-300, 300, 200_000)
    assert _ulps(portable.log(y), np.log(y)).max() <= 2.0
    z = rng.uniform(0, 1, 10_000)
    g = np.exp(rng.normal(0, 0.5, 10_000))
    assert np.allclose(portable.power(z, g), z ** g, rtol=1e-14, atol=0)


def test_edges_are_numpys():
    assert portable.exp(0.0) == 1.0 and abs(portable.exp(1.0) - np.e) <= np.spacing(np.e)
    edges = portable.exp(np.array([710.0, -746.0, np.inf, -np.inf]))
    assert edges.tolist() == [np.inf, 0.0, np.inf, 0.0] and np.isnan(portable.exp(np.nan))
    assert portable.log(np.array([1.0, 0.0, np.inf])).tolist() == [0.0, -np.inf, np.inf]
    assert np.isnan(portable.log(np.array([-1.0, np.nan]))).all()
    assert portable.power(np.array([0.0, 0.0, 2.0, 8.0]), np.array([0.75, 0.0, 10.0, 0.0])).tolist() == \
        [0.0, 1.0, 1024.0, 1.0]
    assert portable.sigmoid(np.array([0.0])).tolist() == [0.5]
