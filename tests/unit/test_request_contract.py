"""One request contract: import, feature building, evaluate, `pond predict` and the HTTP routes all
take their rules from telemetry.request, and give the same verdict on the same request."""

from __future__ import annotations

import ast

import pandas as pd
import pytest
from pydantic import ValidationError

from pond.core.errors import ContractError
from pond.serving.offline import request_columns
from pond.serving.schemas import AllocationRequest
from pond.telemetry.contract import validate_table
from tests.conftest import ROOT
from tests.unit.test_dvc_deps import PACKAGES, closure

REQUEST_MODULE = ROOT / "telemetry" / "request.py"
USERS = {  # who applies the request's rules -> the module that imports them
    "import validation of vms": "telemetry/contract.py",
    "feature building": "features/build.py",
    "evaluate (UM inputs)": "models/um.py",
    "pond predict": "serving/offline.py",
    "both HTTP routes": "serving/schemas.py",
}
ENTRY_POINTS = ("pipelines/ingest.py", "pipelines/features.py", "pipelines/evaluate.py", "serving/offline.py",
                "serving/app.py")


@pytest.mark.parametrize("user", sorted(USERS))
def test_every_user_imports_the_one_request_module(user):
    tree = ast.parse((ROOT / USERS[user]).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
               {f"{n.module}.{a.name}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "pond.telemetry.request" in imported, USERS[user]


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_every_entry_point_runs_it(entry):
    assert REQUEST_MODULE in closure(ROOT / entry)


def test_no_other_module_declares_request_fields():
    declared = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef):
                    for stmt in node.body:
                        if isinstance(stmt, ast.AnnAssign) and getattr(stmt.target, "id", "") == "vm_type":
                            declared.append(f"{path.relative_to(ROOT)}:{node.name}.{stmt.target.id}")
    assert declared and all(d.startswith("telemetry/request.py:") for d in declared), declared


BASE = {"vm_id": "vm-1", "customer_id": "cust-1", "vm_type": "Standard_D4s_v3", "vcpus": 4, "memory_gb": 16.0,
        "os": "linux", "region": "eastus", "cluster_id": "c1"}
CASES = [  # (field, value, accepted)
    ("vm_type", "Standard_B2s", True), ("vm_type", "m5.xlarge", True), ("vm_type", "n2-standard-8", True),
    ("vm_type", "Standard_NC24ads_A100_v4", True), ("vm_type", "any name at all", True),
    ("vm_type", "x" * 128, True), ("vm_type", "x" * 129, False), ("vm_type", "", False), ("vm_type", "   ", False),
    ("vcpus", 1024, True), ("vcpus", 1025, False), ("vcpus", 0, False), ("vcpus", 2.5, False),
    ("memory_gb", 65536.0, True), ("memory_gb", 65536.5, False), ("memory_gb", 0.0, False),
    ("memory_gb", 0.5, True), ("memory_gb", float("inf"), False), ("memory_gb", float("nan"), False),
    ("customer_id", "c" * 256, True), ("customer_id", "c" * 257, False), ("customer_id", " ", False),
    ("os", "o" * 64, True), ("os", "o" * 65, False), ("region", "", False), ("region", "mars-north-1", True),
    ("vcpus", True, False), ("memory_gb", True, False), ("memory_gb", False, False),   # booleans are not numbers
    # Unicode: blanks are Unicode whitespace (a zero-width space is not), lengths count characters, not bytes
    ("customer_id", "\u00a0", False), ("region", "\u3000\t", False), ("os", "\u200b", True),
    ("customer_id", "\u00e9" * 256, True), ("customer_id", "\u00e9" * 257, False), ("vm_type", "\U0001f642" * 128, True),
    # the ids matched against the data are stripped first, as import strips ids
    ("customer_id", " " + "c" * 256 + " ", True), ("cluster_id", "\t" + "c" * 257, False), ("cluster_id", " ", False),
]


def _import_verdict(row: dict) -> bool:
    vms = pd.DataFrame([{**row, "created_at": "2026-01-02T00:00:00Z", "deleted_at": None,
                         "untouched_fraction": None}])   # no server_id, no workload_id: both optional
    try:
        validate_table(vms, "vms")
        return True
    except ContractError:
        return False


def _predict_verdict(row: dict) -> bool:
    try:
        request_columns(pd.DataFrame([row]))
        return True
    except ContractError:
        return False


def _http_verdict(row: dict) -> bool:
    try:
        AllocationRequest.model_validate(row)
        return True
    except ValidationError:
        return False


@pytest.mark.parametrize("field, value, accepted", CASES)
def test_import_predict_and_http_agree(field, value, accepted):
    row = {**BASE, field: value}
    assert (_import_verdict(row), _predict_verdict(row), _http_verdict(row)) == (accepted,) * 3


def test_workload_id_is_optional_and_may_name_workloads_outside_the_lab(small_tables):
    from pond.telemetry.contract import validate_tables
    tables = {k: v.copy() for k, v in small_tables.items()}
    tables["vms"] = tables["vms"].drop(columns=["workload_id", "server_id"])
    out = validate_tables(tables)["vms"]
    assert out.workload_id.isna().all() and out.server_id.isna().all()
    tables["vms"]["workload_id"] = "never-measured/" + tables["vms"].vm_id
    assert validate_tables(tables)["vms"].workload_id.str.startswith("never-measured/").all()


@pytest.mark.parametrize("wrong, right", [("OS", "os"), (" region", "region"), ("Cluster_ID", "cluster_id")])
def test_a_field_spelled_in_another_case_is_named_by_import_and_predict(wrong, right):
    """An optional column (cluster_id) spelled otherwise would be dropped without a word; a required one would be
    reported missing with no hint of why."""
    row = {(wrong if k == right else k): v for k, v in BASE.items()}
    for check in (lambda df: validate_table(df.assign(created_at="2026-01-02T00:00:00Z", deleted_at=None,
                                                      untouched_fraction=None), "vms"), request_columns):
        with pytest.raises(ContractError, match=f"has a column '{wrong}', not '{right}'.*Fix: rename"):
            check(pd.DataFrame([row]))
