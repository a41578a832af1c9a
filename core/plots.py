"""Writing figures: headless backend, written to a temp file and renamed, so no half-written PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig: Any, path: Path, dpi: int = 90) -> None:
    plt = pyplot()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.tight_layout()
    fig.savefig(tmp, dpi=dpi)
    plt.close(fig)
    tmp.replace(path)
