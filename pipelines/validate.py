"""`pond validate DIR`: which commands a directory of telemetry can feed, before any stage runs
(``evaluation.readiness`` checks each table, then the references between them, then what each command needs)."""

from __future__ import annotations

from pond.core.errors import PondError
from pond.core.params import Params
from pond.evaluation.readiness import check, report
from pond.telemetry.storage import Location, location


def run(directory: Location, params: Params | None = None) -> dict[str, list[str]]:
    if not location(directory).is_dir():
        raise PondError(f"validate: {directory} is not a directory of contract tables (CSV or Parquet)")
    state, problems = check(directory, params)
    print(report(state, problems))
    return problems
