"""exp, log and power that give the same bits on every CPU, for the built-in fleet's generator.

numpy picks its float64 ``exp``, ``log``, ``log1p``, ``log2`` and ``power`` kernels by the CPU it runs on
(AVX-512, AVX2, or the baseline), and they differ in the last bit for some inputs. A count rounded from
such a value (``round(rate * cycles * exp(noise))``) then differs by one where it sits at half a count:
on an AVX2 machine, 1,124 of the 18 million counts of the default fleet's ``vm_counters`` did, so
``dvc.lock`` recorded another ``data/raw`` than the repository's. These are built from additions,
multiplications and divisions only, which IEEE 754 rounds the same on every CPU, and ``frexp``,
``ldexp``, ``rint``, which are exact; they agree with numpy's to about one unit in the last place.
"""

from __future__ import annotations

import numpy as np

LN2_HI = 6.93147180369123816490e-01    # ln 2 in its high 32 bits: k * LN2_HI is exact for |k| < 2**20
LN2_LO = 1.90821492927058770002e-10    # ln 2 - LN2_HI
INV_LN2 = 1.44269504088896338700e00
EXP_TERMS = 14                          # Taylor terms of exp(r), |r| <= ln2 / 2: the 15th is below 1e-19 of it
LOG_TERMS = 12                          # odd terms of 2 atanh(s), |s| <= 0.1716: the 13th is below 1e-19 of it
SQRT_HALF = 0.70710678118654752440


def exp(x: np.ndarray | float) -> np.ndarray:
    """e**x; inf above 709.78, 0 below -745.13, nan for nan."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    xf = np.where(finite, x, 0.0)
    k = np.rint(np.clip(xf, -1100.0, 1100.0) * INV_LN2)
    r = (xf - k * LN2_HI) - k * LN2_LO
    p = np.ones_like(r)
    for n in range(EXP_TERMS, 0, -1):      # Horner: 1 + r/1 (1 + r/2 (1 + ... (1 + r/14)))
        p = 1.0 + (r / n) * p
    kk = k.astype(np.int64)
    with np.errstate(over="ignore", under="ignore"):
        out = np.ldexp(np.ldexp(p, kk // 2), kk - kk // 2)   # in two steps: 2**k alone over- or underflows first
    return np.where(finite, out, np.where(x > 0, np.inf, np.where(x < 0, 0.0, np.nan)))


def log(x: np.ndarray | float) -> np.ndarray:
    """The natural logarithm; -inf at 0, nan below 0 or for nan, inf at inf."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x) & (x > 0)
    m, e = np.frexp(np.where(finite, x, 1.0))
    low = m < SQRT_HALF                    # m in [sqrt(1/2), sqrt(2)): log(m) is small and the series short
    m = np.where(low, m * 2.0, m)
    e = (e - low).astype(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    s2 = s * s
    series = np.full_like(s, 1.0 / (2 * LOG_TERMS - 1))
    for n in range(LOG_TERMS - 1, 0, -1):  # 2 (s + s**3/3 + s**5/5 + ...)
        series = 1.0 / (2 * n - 1) + s2 * series
    out = e * LN2_HI + (2.0 * s * series + e * LN2_LO)
    out = np.where(x == 0, -np.inf, out)
    out = np.where(np.isposinf(x), np.inf, out)
    return np.where((x < 0) | np.isnan(x), np.nan, out)


def power(x: np.ndarray | float, y: np.ndarray | float) -> np.ndarray:
    """x**y for x >= 0 (0**y is 0 for y > 0, 1 for y == 0)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    out = exp(y * log(np.where(x > 0, x, 1.0)))
    return np.where(x > 0, out, np.where(y == 0, 1.0, np.where(x == 0, 0.0, np.nan)))


def sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + exp(-np.asarray(x, dtype=np.float64)))
