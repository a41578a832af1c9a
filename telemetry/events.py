"""PMU event names: the lab's event list (reference/clx-2s-events.txt) and the ones features need."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

# Uncore events kept beside the core ones: DRAM CAS counts give memory bandwidth.
UNCORE_KEPT = ("UNC_M_CAS_COUNT.RD", "UNC_M_CAS_COUNT.WR")


@lru_cache(maxsize=1)
def lab_events() -> tuple[str, ...]:
    """Core events of the lab list, in list order and de-duplicated, plus DRAM CAS counts.

    Uncore (UNC_*) and MSR events are per socket, not per VM, so a VM's counters cannot
    carry them; the two CAS counts are kept as the lab's bandwidth signal.
    """
    text = resources.files("pond.telemetry").joinpath("reference/clx-2s-events.txt").read_text()
    seen: dict[str, None] = {}
    for line in text.splitlines():
        name = line.strip()
        if not name or name[0] in "#-;()" or name.startswith(("UNC_", "MSR_")):
            continue
        seen.setdefault(name, None)
    for name in UNCORE_KEPT:
        seen.setdefault(name, None)
    return tuple(seen)
