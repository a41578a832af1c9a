"""Request and response bodies of the HTTP API (docs/design.md); field names are the contract.

The request's fields and their rules are ``telemetry.request.VmRequest``, the same rules import
and ``pond predict`` apply; this module adds only what is HTTP's own.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pond.models.policy import Policy
from pond.telemetry.request import ID_MAX_LEN, Number, VmRequest

Id = Field(min_length=1, max_length=ID_MAX_LEN)
MAX_COUNTERS = 512              # the lab list has 134 events; a map beyond this is not a VM's counters
EventName = Annotated[str, Field(min_length=1, max_length=128)]
Counters = dict[EventName, Annotated[float, Number]]


def finite_counts(v: dict[str, float] | None) -> dict[str, float] | None:
    """Raw counts are finite and non-negative, on every route that takes them."""
    bad = [k for k, x in (v or {}).items() if not math.isfinite(x) or x < 0]
    if bad:
        raise ValueError(f"counts must be finite and >= 0: {bad[:5]}")
    return v


class AllocationRequest(VmRequest):
    counters: Counters | None = Field(default=None, max_length=MAX_COUNTERS,
                                      description="accepted for the QoS path; not used to size")

    _finite = field_validator("counters")(finite_counts)


class Allocation(BaseModel):
    vm_id: str
    decision: Literal["pool_only", "znuma", "local_only"]
    memory_gb: float
    local_gb: float
    pool_gb: float
    znuma_gb: float
    p_insensitive: float | None = Field(description="null without workload history (no LI prediction)")
    untouched_fraction: float = Field(description="conservative untouched fraction after the policy's offset")
    has_history: bool = Field(description="workload history for (customer_id, vm_type, region) in the snapshot")
    customer_history: bool = Field(description="false: unknown customer, the UM model's no-history defaults")
    model_version: str
    policy: dict


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requests: list[AllocationRequest]


class BatchResponse(BaseModel):
    allocations: list[Allocation]


class QosRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vm_id: str = Id
    counters: Counters = Field(min_length=1, max_length=MAX_COUNTERS,
                               description="raw PMU counts of the VM's recent runtime")
    pool_gb: float | None = Field(default=None, ge=0, allow_inf_nan=False,
                                  description="pool memory the VM has now; 0 -> nothing to reconfigure")

    _finite = field_validator("counters")(finite_counts)


class QosResponse(BaseModel):
    vm_id: str
    p_exceeds_pdm: float
    exceeds_pdm: bool
    action: Literal["none", "reconfigure_local"]
    pdm: float
    model_version: str


class ModelInfo(BaseModel):
    version: str
    as_of: str | None
    li_sha256: str
    um_sha256: str
    history_keys: int
    customers: int
    prefilled_shapes: int = 0
    snapshot_time: str | None
    loaded_at: str
    source: str
    policy: Policy
