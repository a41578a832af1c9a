"""`pond ui`: the MLflow UI on the store the nightly job writes, and links that open on its runs.

With the embedded store (data/mlflow) it starts `mlflow ui` on it; with ``MLFLOW_TRACKING_URI`` at a server it only
prints the links into that server's UI. ``--print-only`` prints the links and starts nothing.
"""

from __future__ import annotations

import subprocess
import sys

from pond.core.params import Params
from pond.core.tracking import NIGHTLY, experiment, tracking_uri
from pond.evaluation.registry import ui_links


def run(params: Params, host: str, port: int, print_only: bool) -> int:
    from mlflow import MlflowClient

    uri = tracking_uri()
    served = uri.startswith(("http://", "https://"))
    base = uri.rstrip("/") if served else f"http://{host}:{port}"
    links = ui_links(MlflowClient(uri), base, experiment(NIGHTLY), params.register.model_name)
    if not links:
        print(f"pond ui: no experiment {experiment(NIGHTLY)!r} at {uri} yet: run `dvc repro` first")
    for what, link in links.items():
        print(f"{what:16s} {link}")
    if served or print_only:
        return 0
    print(f"pond ui: mlflow ui on {uri} (Ctrl-C stops it)", flush=True)
    return subprocess.call([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", host,
                            "--port", str(port)])
