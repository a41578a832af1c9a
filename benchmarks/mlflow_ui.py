"""What the MLflow UI shows of the nightly runs, in a real browser: headless Chromium renders the pages a user opens
and this prints what each page shows.

    python -m benchmarks.mlflow_ui [--store data/mlflow/mlflow.db] [--shots reports/mlflow_ui] [--chromium PATH]

Starts `mlflow ui` on the store, then renders the pages `pond ui` links to: the experiment's runs, the last two
nights side by side, and the champion's version page. Each check prints ok or MISSING with what it looked for,
and a screenshot of every page is written to ``--shots``. Exit 1 when a check fails. Run after two nights
(`bash scripts/run.sh --no-serve`, then `dvc exp run --set-param base.as_of=...`). Debian's `chromium` package
gives the browser.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

HEADLINE = ("li_at_fp2", "um_at_op4", "realized_pool", "realized_mispredictions", "dram_saved")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def render(chromium: str, url: str, shot: Path, budget_ms: int = 20000) -> str:
    """The page's DOM after ``budget_ms`` of virtual time (the UI is a single-page app), and a screenshot."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--window-size=1600,1000", f"--virtual-time-budget={budget_ms}"]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([chromium, *flags, f"--user-data-dir={profile}", "--dump-dom", url],
                             capture_output=True, text=True, timeout=180, check=False).stdout
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *flags, f"--user-data-dir={profile}", f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=180, check=False)
    return dom


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", default="data/mlflow/mlflow.db")
    ap.add_argument("--shots", default="reports/mlflow_ui")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--model", default="pond-znuma")
    args = ap.parse_args()
    shots = Path(args.shots)
    shots.mkdir(parents=True, exist_ok=True)
    port = _port()
    base = f"http://127.0.0.1:{port}"
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--port", str(port), "--backend-store-uri",
                           f"sqlite:///{Path(args.store).resolve()}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"})
    failed = 0
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        from mlflow import MlflowClient

        from pond.evaluation.registry import ui_links

        client = MlflowClient(f"sqlite:///{Path(args.store).resolve()}")
        links = ui_links(client, base, "pond", args.model)
        eid = client.get_experiment_by_name("pond").experiment_id
        nights = [r.info.run_name for r in client.search_runs(
            [eid], "tags.`pond.kind` = 'night' and attributes.status = 'FINISHED'",
            order_by=["attributes.start_time DESC"], max_results=2)]
        pages = {"runs": (links["runs"], nights),
                 "compare": (links.get("last two nights", ""), [*nights, *HEADLINE, "served_policy"]),
                 "champion": (links.get("champion", ""), ["Inputs (8)", "Outputs (11)", "Source Run"])}
        print(f"mlflow ui on {args.store}: experiment {eid}, nights {nights}; links as `pond ui` prints them")
        for page, (url, wanted) in pages.items():
            if not url:
                failed += 1
                print(f"  {page:10s} MISSING no link (fewer than two nights, or no champion)")
                continue
            dom = render(args.chromium, url, shots / f"{page}.png")
            for text in wanted:
                seen = text in dom
                failed += not seen
                print(f"  {page:10s} {'ok     ' if seen else 'MISSING'} {text}")
            overview = "No data available" in dom
            failed += overview
            print(f"  {page:10s} {'MISSING' if overview else 'ok     '} not the GenAI overview")
        plain = render(args.chromium, f"{base}/#/experiments/{eid}", shots / "plain.png")
        print(f"  (the experiment's plain link #/experiments/{eid} opens on "
              f"{'the GenAI overview' if 'No data available' in plain else 'its runs'}: MLflow's own choice)")
        print(f"screenshots: {shots}/{{runs,compare,champion,plain}}.png")
    finally:
        ui.terminate()
        ui.wait(timeout=30)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
