"""The pipeline's environment variables are one typed model (``core.runtime.Runtime``): the code reads
them through it, and each means what it meant when read by hand."""

from __future__ import annotations

import re

import pytest

from pond.core.runtime import Runtime
from tests.conftest import PACKAGES, ROOT


def test_defaults_are_what_an_unset_environment_meant():
    r = Runtime.now({})
    assert (r.mlflow_tracking_uri, r.mlflow_experiment, r.mlflow_disable_telemetry, r.duckdb_memory, r.duckdb_temp,
            r.quiet, r.dask_scheduler_address, r.scratch, r.prometheus_multiproc_dir, r.omp_spin) == \
        (None, None, "true", "2GB", None, False, None, None, None, "1000")


@pytest.mark.parametrize(("value", "quiet"), [("", False), ("0", False), ("false", False), (" No ", False),
                                              ("1", True), ("yes", True), ("anything", True)])
def test_pond_quiet_keeps_its_rule(value, quiet):
    assert Runtime.now({"POND_QUIET": value}).quiet is quiet


def test_an_empty_variable_is_unset_and_others_are_ignored():
    r = Runtime.now({"POND_SCRATCH": "", "DASK_SCHEDULER_ADDRESS": "tcp://h:8786", "HOME": "/root"})
    assert r.scratch is None and r.dask_scheduler_address == "tcp://h:8786"


def test_no_module_reads_the_environment_by_hand():
    """Writes (a command setting a variable for what it runs) and save/restore stay; reads go through Runtime."""
    reads = re.compile(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[[^\]]+\](?!\s*=)")
    allowed = {"core/runtime.py", "core/progress.py"}   # the last saves and restores
    found = [f"{p.relative_to(ROOT)}:{i}" for d in PACKAGES for p in sorted((ROOT / d).rglob("*.py"))
             if p.relative_to(ROOT).as_posix() not in allowed
             for i, line in enumerate(p.read_text().splitlines(), 1) if reads.search(line)]
    assert not found, found


def test_a_command_sets_a_short_spin_unless_the_operator_chose_how_openmp_waits():
    """libgomp spins 300,000 times by default, which stalls two jobs sharing the cores; a spin count set beside an
    operator's OMP_WAIT_POLICY would override it (libgomp reads GOMP_SPINCOUNT first)."""
    assert Runtime.openmp({}) == {"GOMP_SPINCOUNT": "1000"}
    assert Runtime.openmp({"GOMP_SPINCOUNT": "50"}) == {"GOMP_SPINCOUNT": "50"}
    assert Runtime.openmp({"OMP_WAIT_POLICY": "PASSIVE"}) == {}
    assert Runtime.openmp({"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "50"}) == {}
