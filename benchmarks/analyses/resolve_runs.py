"""This checkout's solver on the saved nights of finished acceptance runs, without running them again.

    python -m benchmarks.analyses.resolve_runs /tmp/pond-bv-42n /tmp/pond-bv-43n ... [--variants pond walks]

Each DIR/VARIANT is a work dir of `benchmarks/backtest_variants.py`, or any folder laid out the same way: ``backtest``
(a `pond backtest --out` folder), ``features``, ``li``, ``raw`` and ``params.yaml``. Per night, `optimize`'s inputs
are recomputed from what the run saved (`regret_anatomy.replay`: the lab's LI counts, the fleet's LI shares, the UM
backtest nights) and the solver chooses again with this checkout's `optimize` params; the choice is realized on the
night's saved next-day decisions (`evaluation.regret.realized_grid`). The models and the nights do not depend on the
policy, so this is what a fresh run with this solver gives (on seeds 42-44, and on the 10M run of the README's
scale-out, it gave each run's figures exactly). Prints, per variant,
the solver's pair and the UM-only policy (``optimize.serve``'s default): nights within the budget, worst night,
mean regret and pool share.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.analyses.regret_anatomy import replay, summary
from pond.core.params import load

ROOT = Path(__file__).resolve().parents[2]

def resolve(wd: Path) -> tuple[str, str]:
    """(the solver's pair, UM only) re-chosen on every saved night of ``wd`` with this checkout's params."""
    r = replay(wd)
    o = load(ROOT / "params.yaml").optimize
    params = [night.params.model_copy(update={"optimize": o}) for night in r.nights]
    return (summary(r, [r.resolve(n, params=p) for n, p in zip(r.nights, params)]),
            summary(r, [r.resolve_um_only(n, params=p) for n, p in zip(r.nights, params)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workdirs", nargs="+", type=Path)
    ap.add_argument("--variants", nargs="+", default=["pond", "walks"])
    a = ap.parse_args()
    for wd in a.workdirs:
        for v in a.variants:
            pair, um_only = resolve(wd / v)
            print(f"{wd.name} {v}: pair: {pair} | UM only: {um_only}", flush=True)


if __name__ == "__main__":
    main()
