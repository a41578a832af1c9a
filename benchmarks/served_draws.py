"""The policy the service would serve on other draws of the built-in fleet: `simulate` on finished acceptance runs.

    python -m benchmarks.backtest_variants --seeds 43 44 --variants pond --workdir /tmp/bv8   # the nights first
    python -m benchmarks.served_draws --workdir /tmp/bv8 [--variant pond]

Each ``<workdir>/seed<N>/<variant>`` of ``benchmarks.backtest_variants`` holds what the nightly job holds before
`simulate` (the draw's tables and its 14 nights, with params.yaml's settings but the seed), so `simulate` there gives
the sizing answer and the policy `optimize.serve: answer` serves, as `dvc repro simulate` would in a copy of the
repository with only ``base.seed`` changed. Runs `pond simulate` in every such folder that has no ``simulate.json``
yet (about 5 minutes each on 2 cores, alone), then prints one JSON line per draw and latency ratio and a Markdown table:
the policy served, its pool size, the DRAM it saves with its 90% interval over clusters, and whether it beats the
runner-up beyond their paired interval.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from pond.models.names import split_ratio


def simulated(wd: Path) -> dict:
    out = wd / "simulate.json"
    if not out.is_file():
        subprocess.run([sys.executable, "-m", "pond.pipelines.cli", "--quiet", "--params", "params.yaml", "simulate",
                        "--raw", "raw", "--nightly", "backtest", "--out", "simulate", "--metrics", out.name,
                        "--plots", "plots/simulate"], cwd=wd, check=True)
    return json.loads(out.read_text())


def verdict(a: dict) -> str:
    if a.get("decided"):
        return f"decided against `{split_ratio(a.get('runner_up', '-'))[0]}`"
    tied = " and ".join(f"`{split_ratio(x)[0]}`" for x in a.get("undecided_between", []))
    own = "" if a.get("policy") in a.get("undecided_between", []) else ": the solver's own rule served"
    return f"undecided between {tied}{own}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--variant", default="pond")
    a = ap.parse_args()
    runs = sorted((int(p.parent.name.removeprefix("seed")), p) for p in a.workdir.glob(f"seed*/{a.variant}")
                  if (p / "metrics" / "backtest.json").is_file())     # written once every night has run
    if not runs:
        raise SystemExit(f"{a.workdir}: no seed<N>/{a.variant} with a finished backtest (metrics/backtest.json); "
                         "run benchmarks.backtest_variants first")
    rows = []
    for seed, wd in runs:
        s = simulated(wd)
        for ratio, ans in s.get("answer", {}).items():
            iv = ans.get("savings_interval", [float("nan")] * 2)
            row = {"seed": seed, "latency_ratio": ratio, "served": split_ratio(ans.get("policy", "-"))[0],
                   "pool_sockets": ans.get("pool_sockets"), "savings": ans.get("savings"), "interval": iv,
                   "decided": bool(ans.get("decided")), "verdict": verdict(ans)}
            print(json.dumps(row))
            rows.append(row)
    print("| seed | latency | served | pool sockets | DRAM saved, 90% interval | verdict |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['seed']} | {float(r['latency_ratio']):.0%} | `{r['served']}` | {r['pool_sockets']} | "
              f"{100 * r['savings']:+.1f}% [{100 * r['interval'][0]:+.1f}, {100 * r['interval'][1]:+.1f}] | "
              f"{r['verdict']} |")


if __name__ == "__main__":
    main()
