"""What ``/v1/qos`` flagged, remembered per customer and VM type: the LI call is refused to their next VMs.

An LI call that is wrong for one VM of a deployment (a customer's VMs of one type: one workload) is wrong for the
next hundred, and the monitor may move back at most 1% of a day's VMs. So once ``/v1/qos`` flags a VM on the pool
whose call names its ``customer_id`` and ``vm_type``, the service decides their next VMs as if the LI model had no
prediction for them (Pond's UM split: a zNUMA node, never all of the VM on the pool) for ``POND_QOS_REFUSAL_HOURS``
after the flag; a later flag extends it. ``evaluation.refusal`` replays the same rule over the backtest's nights.

Shared by the workers: with ``POND_QOS_FLAGS`` (a SQLite file; ``pond serve --workers N`` makes one for its
workers when it is unset) every worker writes its flags there and reads the others' at most
``REFRESH_S`` later; without it, the memory is the process's own. The allocation routes only read a dict.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

REFRESH_S = 1.0     # a flag another worker wrote is seen this much later at most
log = logging.getLogger("pond.serving")


class FlagMemory:
    """The groups whose LI call is refused, and until when (seconds since the epoch)."""

    def __init__(self, path: Path | None, hold_hours: float, clock: Callable[[], float] = time.time) -> None:
        self.path, self.hold_s, self.clock = path, 3600.0 * hold_hours, clock
        self.until: dict[tuple[str, str], float] = {}
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._version: int | None = None

    @property
    def enabled(self) -> bool:
        return self.hold_s > 0

    def open(self) -> None:
        """Connect to the shared file (the service's lifespan calls it: nothing is created before)."""
        if self.path is None or not self.enabled:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=5.0, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE IF NOT EXISTS flags (customer_id TEXT NOT NULL, vm_type TEXT NOT NULL, "
                     "until REAL NOT NULL, PRIMARY KEY (customer_id, vm_type))")
        self._conn = conn
        self._refresh(force=True)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def remember(self, customer_id: str, vm_type: str) -> float:
        """A flag of one of the group's VMs, now: refused until the time returned."""
        until = self.clock() + self.hold_s
        key = (customer_id, vm_type)
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.execute("INSERT INTO flags VALUES (?, ?, ?) ON CONFLICT (customer_id, vm_type) "
                                       "DO UPDATE SET until = max(until, excluded.until)", (*key, until))
                except sqlite3.Error as exc:    # this worker still refuses; the others learn of it when it heals
                    log.warning("POND_QOS_FLAGS %s: could not share a flag (%s); this worker keeps it. Fix: a "
                                "writable file on a local disk", self.path, exc)
            self.until = {**self.until, key: max(self.until.get(key, until), until)}
            return self.until[key]

    def refused(self, customer_id: str, vm_type: str) -> bool:
        """Whether the group's LI call is refused now: a dict look-up, and at most every ``REFRESH_S`` a check
        of the shared file for another worker's writes."""
        if self._conn is not None:
            self._refresh()
        until = self.until.get((customer_id, vm_type))
        return until is not None and until > self.clock()

    def _refresh(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._checked < REFRESH_S:
            return
        self._checked = now
        with self._lock:
            if self._conn is None:
                return
            try:
                version = self._conn.execute("PRAGMA data_version").fetchone()[0]
                if force or version != self._version:
                    rows = self._conn.execute("SELECT customer_id, vm_type, until FROM flags WHERE until > ?",
                                              (self.clock(),)).fetchall()
                    self._version = version
                    mine = {k: u for k, u in self.until.items() if u > self.clock()}   # what the file may lack
                    got = {(c, v): u for c, v, u in rows}
                    self.until = {**mine, **{k: max(u, mine.get(k, u)) for k, u in got.items()}}
            except sqlite3.Error as exc:        # the allocation routes keep answering with what this worker knows
                log.warning("POND_QOS_FLAGS %s: could not read the workers' flags (%s); this worker's own still "
                            "refuse", self.path, exc)
