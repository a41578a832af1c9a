"""Writing figures: headless backend, written to a temp file and renamed, so no half-written PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pond.core.errors import name_full_disk


def pyplot() -> Any:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(fig: Any, path: Path, dpi: int = 90) -> None:
    plt = pyplot()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.tight_layout()
    try:
        fig.savefig(tmp, dpi=dpi)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        name_full_disk(exc, path)
        raise
    finally:
        plt.close(fig)
    tmp.replace(path)
