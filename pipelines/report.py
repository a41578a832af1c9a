"""`pond report`: tonight's headline figures, printed and written as Markdown and as one
self-contained HTML page with every plot inline (evaluation.report)."""

from __future__ import annotations

import json
from pathlib import Path

from pond.core.errors import ConfigError
from pond.evaluation.report import closing, headline, to_html, to_markdown, to_text
from pond.telemetry.atomic import write_atomic

STAGES = ("train_li", "train_monitor", "train_um", "optimize", "evaluate", "backtest", "simulate", "register")


def load(metrics_dir: Path) -> dict[str, dict]:
    """Each stage's metrics file that exists, parsed; ConfigError where none does or one is not JSON."""
    metrics = {}
    for stage in STAGES:
        path = Path(metrics_dir) / f"{stage}.json"
        if path.exists():
            try:
                metrics[stage] = json.loads(path.read_text())
            except json.JSONDecodeError as exc:
                raise ConfigError(f"report: {path} is not JSON ({exc}); rerun `dvc repro` to rewrite it") from None
    if not metrics:
        raise ConfigError(f"report: no stage metrics in {metrics_dir} (train_li.json, ...): run `dvc repro` first")
    return metrics


def run(metrics_dir: Path, out: Path, plots_dir: Path = Path("plots")) -> str:
    metrics = load(metrics_dir)
    rows = headline(metrics)
    night = metrics.get("register", {}).get("as_of") or metrics.get("evaluate", {}).get("day", "?")
    title = f"pond-znuma, night {night}"
    last = closing(metrics)
    write_atomic(out, to_markdown(rows, title, last))
    images = {p.relative_to(plots_dir).as_posix(): p.read_bytes() for p in sorted(Path(plots_dir).rglob("*.png"))}
    page = out.with_suffix(".html")
    write_atomic(page, to_html(rows, title, images))
    text = to_text(rows, last)
    print(text)
    print(f"report: written to {out} and {page} ({len(images)} plots inline, no outside URL)")
    return text
