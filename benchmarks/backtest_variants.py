"""Issue 13's acceptance run: a 14-night backtest on each built-in fleet variant.

    python benchmarks/backtest_variants.py                    # both variants, 14 nights, params.yaml
    python benchmarks/backtest_variants.py --variants walks --nights 3 --workdir /tmp/bt

For each variant, in its own work dir: `pond generate`, `features`, `train_li` and
`pond backtest N` with the repository's params except ``generate.variant`` (PDM, TP and the
latency ratio are params.yaml's `optimize` section: 5 / 98 / 1.82). Prints, per variant, the
nights whose realized mispredictions are within the budget, the mean and max regret, and the
LI selection (selected procedure vs best single-counter rule on held-out halves at FP 2%), and
writes the same as JSON to ``<workdir>/summary.json``. About 60 s per night on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]


def pond(wd: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pipelines.cli", "--params", str(wd / "params.yaml"), *args],
                   cwd=wd, check=True)


def variant(name: str, nights: int, wd: Path) -> dict:
    wd.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["generate"]["variant"] = name
    (wd / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    t0 = time.perf_counter()
    pond(wd, "generate", "--out", "raw")
    pond(wd, "features", "--raw", "raw", "--out", "features", "--metrics", "features.json")
    pond(wd, "train_li", "--features", "features", "--raw", "raw", "--out", "li", "--metrics", "train_li.json",
         "--plots", "plots/train_li")
    pond(wd, "backtest", str(nights), "--raw", "raw", "--features", "features", "--li", "li", "--out", "backtest",
         "--plots", "plots/backtest")
    n = pd.read_csv(wd / "backtest" / "nights.csv")
    li = json.loads((wd / "train_li.json").read_text())
    ratio = params["optimize"]["latency_ratio"]
    sel = li[f"r{ratio:g}_pdm{params['optimize']['pdm']}"]
    rule = sel["selection.best_rule"]
    return {
        "variant": name, "nights": len(n),
        "within_budget": int((n.realized_mispredictions <= n.budget).sum()),
        "within_budget_worst_case": int((n.realized_worst_case <= n.budget).sum()),
        "realized_mispredictions_max": round(float(n.realized_mispredictions.max()), 4),
        "realized_pool_mean": round(float(n.realized_pool.mean()), 4),
        "regret_mean_points": round(100 * float(n.regret.mean()), 2),
        "regret_max_points": round(100 * float(n.regret.max()), 2),
        "li_selected": sel["selection.method"], "li_heldout_selected": sel["selection.heldout_li.selected"],
        "li_best_rule": rule, "li_heldout_best_rule": sel[f"selection.heldout_li.{rule}"],
        "wall_s": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", nargs="+", default=["pond", "walks"])
    ap.add_argument("--nights", type=int, default=14)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pond-backtest-variants"))
    a = ap.parse_args()
    rows = [variant(v, a.nights, a.workdir / v) for v in a.variants]
    for r in rows:
        print(f"{r['variant']:6s} within budget {r['within_budget']}/{r['nights']} nights "
              f"(worst case {r['within_budget_worst_case']}), max {100 * r['realized_mispredictions_max']:.2f}%; "
              f"pool {100 * r['realized_pool_mean']:.1f}%; regret mean {r['regret_mean_points']:.2f} "
              f"max {r['regret_max_points']:.2f} points; LI {r['li_selected']} {r['li_heldout_selected']} vs "
              f"{r['li_best_rule']} {r['li_heldout_best_rule']}; {r['wall_s']:.0f} s")
    (a.workdir / "summary.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
