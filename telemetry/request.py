"""The VM request: the fields a scheduler sends per VM, and the one set of rules for them.

Every path that reads request fields uses this module: import validation of the ``vms`` table
(``telemetry.contract``), feature building (``features.build``), scoring in evaluate
(``models.inference``), ``pond predict`` (``serving.offline``) and both HTTP routes
(``serving.schemas``). A rule written here holds everywhere; no other module adds one, so a
request that import accepts is served, and the other way round.

The rules bound what can be trusted, not what names look like: ``vm_type`` is any non-empty name
(``telemetry.vm_types`` parses the schemes it knows); an unknown customer, region or OS is a
value the models have not seen, never an error.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Annotated, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from pond.core.errors import ContractError

ID_MAX_LEN = 256        # vm_id, customer_id, cluster_id
VM_TYPE_MAX_LEN = 128
NAME_MAX_LEN = 64       # os, region
VCPUS_MAX = 1024        # the largest VMs of the clouds today have 448-896 vCPUs
MEMORY_GB_MAX = 65536.0  # and 24-32 TB of memory

REQUIRED = ("vm_id", "customer_id", "vm_type", "vcpus", "memory_gb", "os", "region")
OPTIONAL = ("cluster_id",)
FIELDS = REQUIRED + OPTIONAL
HISTORY_KEY = ("customer_id", "vm_type", "region")   # workload history: earlier VMs of the same key
SHAPE = ("customer_id", "vm_type", "vcpus", "memory_gb", "os", "region", "cluster_id")  # what the models see
TABLE = "requests"   # what errors call a file of requests (``pond predict``)
TEXT_LIMITS = {"vm_id": ID_MAX_LEN, "customer_id": ID_MAX_LEN, "vm_type": VM_TYPE_MAX_LEN, "os": NAME_MAX_LEN,
               "region": NAME_MAX_LEN, "cluster_id": ID_MAX_LEN}
TEXT_FIELDS = tuple(TEXT_LIMITS)
RULES = (f"vm_id, customer_id, vm_type, os, region: non-empty text (ids and cluster_id up to {ID_MAX_LEN} "
         f"characters, vm_type up to {VM_TYPE_MAX_LEN}, os and region up to {NAME_MAX_LEN}); vcpus: a whole "
         f"number in [1, {VCPUS_MAX}]; memory_gb: a finite number in (0, {MEMORY_GB_MAX:g}]; cluster_id optional")


def _not_a_boolean(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError("must be a number, not a boolean")   # noqa: TRY004  pydantic reports ValueError as a 422
    return value


Number = BeforeValidator(_not_a_boolean)   # JSON true is not 1 GB, nor 1 vCPU

MATCHED_IDS = ("customer_id", "cluster_id")   # matched against the data (history, the models' categories)


def _strip(value: Any) -> Any:
    return value.strip() if isinstance(value, str) else value


Matched = BeforeValidator(_strip)   # import strips ids: " cust-1" must find cust-1's history, as in the export


def strip_matched(df: pd.DataFrame) -> pd.DataFrame:
    """The ids a request is matched on, stripped of surrounding spaces as import strips them (``Matched``)."""
    cols = [c for c in MATCHED_IDS if c in df.columns and not pd.api.types.is_numeric_dtype(df[c])]
    return df.assign(**{c: df[c].astype("string").str.strip() for c in cols}) if cols else df


def booleans(s: pd.Series) -> pd.Series:
    """Where a column holds booleans: a bool column whole, or the bool values of a mixed one."""
    if pd.api.types.is_bool_dtype(s):
        return pd.Series(True, index=s.index)
    if s.dtype == object:
        return s.map(type).isin([bool, np.bool_])
    return pd.Series(False, index=s.index)


def _text(limit: int, description: str) -> Any:
    return Field(min_length=1, max_length=limit, pattern=r"\S", description=description)


class VmRequest(BaseModel):
    """One VM request as the HTTP API takes it (docs/design.md)."""

    model_config = ConfigDict(extra="forbid")

    vm_id: str = _text(ID_MAX_LEN, "the scheduler's id of the VM, echoed in the answer")
    customer_id: Annotated[str, Matched] = _text(ID_MAX_LEN, "any customer; one the snapshot does not know gets "
                                                           "the no-history path; surrounding spaces are dropped")
    vm_type: str = _text(VM_TYPE_MAX_LEN, "any size name (Standard_D4s_v3, m5.xlarge, n2-standard-8, ...)")
    vcpus: Annotated[int, Number] = Field(ge=1, le=VCPUS_MAX)
    memory_gb: Annotated[float, Number] = Field(gt=0, le=MEMORY_GB_MAX, allow_inf_nan=False)
    os: str = _text(NAME_MAX_LEN, "guest OS, any value")
    region: str = _text(NAME_MAX_LEN, "any region")
    cluster_id: Annotated[str | None, Matched] = Field(default=None, min_length=1, max_length=ID_MAX_LEN)


class VmGroup(BaseModel):
    """A running VM's customer and VM type by ``VmRequest``'s rules, both or neither: what the QoS monitor's flags are
    remembered by (``serving.flag_memory``)."""

    customer_id: Annotated[str | None, Matched] = Field(
        default=None, min_length=1, max_length=ID_MAX_LEN, pattern=r"\S",
        description="with vm_type: a flag refuses the LI call to their next VMs (POND_QOS_REFUSAL_HOURS); null: the "
                    "flag is not remembered")
    vm_type: str | None = Field(default=None, min_length=1, max_length=VM_TYPE_MAX_LEN, pattern=r"\S",
                                description="the VM's type, as in its allocation request")

    @model_validator(mode="after")
    def _both(self) -> VmGroup:
        if (self.customer_id is None) != (self.vm_type is None):
            missing = "vm_type" if self.vm_type is None else "customer_id"
            raise ValueError(f"{missing} is missing: give customer_id and vm_type together, or neither")
        return self


# (field, limit, stripped first): VmRequest's text fields that must hold a character that is not space
_PLAIN_TEXT = (("vm_id", ID_MAX_LEN, False), ("customer_id", ID_MAX_LEN, True), ("vm_type", VM_TYPE_MAX_LEN, False),
               ("os", NAME_MAX_LEN, False), ("region", NAME_MAX_LEN, False))


def plain_request(obj: Any, nullable: frozenset[str] = frozenset()) -> tuple | None:
    """``FIELDS``' values of a decoded JSON object that ``VmRequest`` surely accepts, as it would give
    them; None where only ``VmRequest`` can tell (it then decides, and words any refusal).

    The scheduler's call answers most requests from here, in a few microseconds instead of a
    validator's model build. Every rule is ``VmRequest``'s own, on the narrowest types: a text field
    is ASCII with a character that is not space (so the pattern ``\\S`` holds whatever an engine
    counts as Unicode space), ``vcpus`` an exact int, ``memory_gb`` an int or float. Anything else
    (non-ASCII text, ``4.0`` vCPUs, a string of digits, a field ``VmRequest`` does not know) goes
    the long way. Names in ``nullable`` (a route's own optional fields) are allowed when null.
    ``tests/data/test_request_rules.py`` checks the two agree on thousands of drawn bodies.
    """
    if type(obj) is not dict or not obj.keys() <= _allowed(nullable):
        return None
    if any(obj[k] is not None for k in nullable if k in obj):
        return None
    out = []
    for name, limit, strip in _PLAIN_TEXT:
        v = obj.get(name)
        if type(v) is not str or not v.isascii():
            return None
        if strip:
            v = v.strip()
        if not 0 < len(v) <= limit or v.isspace():
            return None
        out.append(v)
    vcpus, memory = obj.get("vcpus"), obj.get("memory_gb")
    if type(vcpus) is not int or not 1 <= vcpus <= VCPUS_MAX:
        return None
    if type(memory) is int:
        memory = float(memory)
    elif type(memory) is not float:
        return None
    if not 0 < memory <= MEMORY_GB_MAX:     # NaN fails too
        return None
    cluster = obj.get("cluster_id")
    if cluster is not None:
        if type(cluster) is not str:
            return None
        cluster = cluster.strip()
        if not 0 < len(cluster) <= ID_MAX_LEN:
            return None
    vm_id, customer, vm_type, os_, region = out
    return vm_id, customer, vm_type, vcpus, memory, os_, region, cluster


_PLAIN_KEYS = frozenset(FIELDS)


@functools.lru_cache(maxsize=8)
def _allowed(nullable: frozenset[str]) -> frozenset[str]:
    return _PLAIN_KEYS | nullable


def _rows(ids: pd.Series, mask: pd.Series | np.ndarray) -> list:
    return ids[np.asarray(mask, dtype=bool)].astype(str).head(6).tolist()


def arrow_text(s: pd.Series) -> pa.ChunkedArray | None:
    """The Arrow strings behind a text column, to compute on in place; None for other storage."""
    values = s.array
    return pa.chunked_array(values.__arrow_array__()) if isinstance(values, pd.arrays.ArrowStringArray) else None


def _blank_and_length(s: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(empty or whitespace only, length in characters) per value, False and 0 where missing. Arrow
    strings are measured in place: at 10M VMs, stripping a copy of every text column made these
    checks take 3.1 s instead of 1.5 s, and 0.3 GiB more at their peak."""
    column = arrow_text(s)
    if column is not None:
        length = pc.utf8_length(column)
        blank = pc.or_(pc.equal(length, 0), pc.utf8_is_space(column))
        return (np.asarray(pc.fill_null(blank, False), bool),
                np.asarray(pc.fill_null(length, 0), np.int64))
    return ((s.str.strip().str.len() == 0).fillna(False).to_numpy(bool),
            s.str.len().fillna(0).to_numpy(np.int64))


def near_names(have: Iterable[Any], wanted: Iterable[str]) -> dict[str, str]:
    """{a name in ``have``: the ``wanted`` name it is but for case and surrounding spaces}, in ``wanted``'s
    order: a table file, column or PMU event named otherwise is misnamed, not missing or extra."""
    wanted = list(wanted)
    return {h: w for w in wanted for h in have
            if isinstance(h, str) and h not in wanted and h.strip().lower() == w.lower()}


def refuse_near_names(df: pd.DataFrame, table: str, names: list[str]) -> None:
    """A contract column spelled with other case or stray spaces is that column misnamed, not an
    extra column to ignore: an optional one (``workload_id``, ``untouched_so_far``) would otherwise
    be dropped without a word."""
    near = near_names(df.columns, [n for n in names if n not in df.columns])
    if near:
        wrong, name = next(iter(near.items()))
        raise ContractError(table, f"the file has a column {wrong!r}, not {name!r} (column names are matched "
                            "exactly)", column=name, fix=f"rename {wrong!r} to {name!r}")


def check_frame(df: pd.DataFrame, table: str, key: str = "vm_id") -> None:
    """Raise ContractError for the first request field that breaks a rule (vectorized).

    ``df`` holds the request columns (``cluster_id`` optional), already typed or raw.
    """
    refuse_near_names(df, table, [*REQUIRED, *OPTIONAL])
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise ContractError(table, f"missing columns {missing}", column=missing[0],
                            fix=f"provide {list(REQUIRED)} ({', '.join(OPTIONAL)} optional)")
    ids = df[key].astype("string") if key in df.columns else pd.Series(range(len(df))).astype(str)
    for col, limit in TEXT_LIMITS.items():
        if col not in df.columns:
            continue
        s = df[col].astype("string")
        blank, length = _blank_and_length(s)
        blank = blank | (s.isna().to_numpy() if col in REQUIRED else False)
        if blank.any():
            raise ContractError(table, f"{col} must be non-empty text", column=col, rows=_rows(ids, blank),
                                fix=f"fill {col} in these rows")
        long = length > limit
        if long.any():
            raise ContractError(table, f"{col} is longer than {limit} characters", column=col,
                                rows=_rows(ids, long), fix=f"shorten {col} to at most {limit} characters")
    vcpus = pd.to_numeric(df["vcpus"], errors="coerce").astype("float64")
    bad = ~((vcpus >= 1) & (vcpus <= VCPUS_MAX) & (vcpus == np.floor(vcpus))) | booleans(df["vcpus"])
    if bad.any():
        raise ContractError(table, f"vcpus must be a whole number in [1, {VCPUS_MAX}]", column="vcpus",
                            rows=_rows(ids, bad), fix="fix vcpus in these rows")
    mem = pd.to_numeric(df["memory_gb"], errors="coerce").astype("float64")
    bad = ~((mem > 0) & (mem <= MEMORY_GB_MAX)) | booleans(df["memory_gb"])   # also NaN and inf
    if bad.any():
        raise ContractError(table, f"memory_gb must be a finite number in (0, {MEMORY_GB_MAX:g}]",
                            column="memory_gb", rows=_rows(ids, bad), fix="fix memory_gb in these rows")


def text_values(column: pd.Series) -> list[str]:
    """A text field's values as the engine takes them (``columns_of``)."""
    return column.astype(str).tolist()


def cluster_values(column: pd.Series) -> list[Any]:
    """cluster_id's values as the engine takes them: None where missing (``columns_of``)."""
    return column.astype(object).where(column.notna(), None).tolist()


def columns_of(df: pd.DataFrame) -> dict[str, Any]:
    """Request columns as the engine takes them: text as lists of str, sizes as float64 arrays,
    cluster_id as a list (None where missing, or None for the whole column when absent)."""
    cols: dict[str, Any] = {c: text_values(df[c]) for c in ("vm_id", "customer_id", "vm_type", "os", "region")
                            if c in df.columns}
    cols["vcpus"] = pd.to_numeric(df["vcpus"]).to_numpy(np.float64)
    cols["memory_gb"] = pd.to_numeric(df["memory_gb"]).to_numpy(np.float64)
    cols["cluster_id"] = cluster_values(df["cluster_id"]) if "cluster_id" in df.columns else None
    return cols
