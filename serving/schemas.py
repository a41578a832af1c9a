"""Request and response bodies of the HTTP API (docs/design.md); field names are the contract.

The request's fields and their rules are ``telemetry.request.VmRequest``, the same rules import
and ``pond predict`` apply; this module adds only what is HTTP's own.
"""

from __future__ import annotations

import math
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pond.models.policy import Policy
from pond.telemetry.request import ID_MAX_LEN, MEMORY_GB_MAX, Number, VmGroup, VmRequest

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
    p_insensitive: float | None = Field(description="null without workload history, or while the QoS monitor's flag "
                                                    "refuses the LI call to the customer and VM type (no LI prediction)")
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


class QosAllocation(BaseModel):
    """What the VM runs on while its counters were counted: the monitor judges the counters of this allocation."""
    model_config = ConfigDict(extra="forbid")

    memory_gb: float = Field(gt=0, le=MEMORY_GB_MAX, allow_inf_nan=False, description="the VM's memory")
    pool_gb: float = Field(ge=0, le=MEMORY_GB_MAX, allow_inf_nan=False,
                           description="of it, on the pool (zNUMA node or pool-backed); 0: nothing to reconfigure")
    latency_ratio: float | None = Field(default=None, ge=1, le=10, allow_inf_nan=False,
                                        description="the pool's latency over local DRAM's; null: the served policy's")

    @model_validator(mode="after")
    def _within(self) -> QosAllocation:
        if self.pool_gb > self.memory_gb:
            raise ValueError(f"pool_gb ({self.pool_gb:g}) exceeds memory_gb ({self.memory_gb:g})")
        return self


class QosRequest(VmGroup):
    model_config = ConfigDict(extra="forbid")

    vm_id: str = Id
    counters: Counters = Field(min_length=1, max_length=MAX_COUNTERS,
                               description="raw PMU counts of the VM's recent runtime, under `allocation`")
    allocation: QosAllocation = Field(description="the memory the VM has, and how much of it is on the pool")

    _finite = field_validator("counters")(finite_counts)


class QosResponse(BaseModel):
    vm_id: str
    p_exceeds_pdm: float
    exceeds_pdm: bool
    action: Literal["none", "reconfigure_local"]
    pdm: float
    monitor: Literal["pool_counters", "li_model"] = Field(
        description="pool_counters: the monitor's model of counters under an allocation; li_model: the bundle has "
                    "none (no spill_counters in its lab), and the LI model scores the counters as its fallback")
    threshold: float = Field(description="the probability at which the VM is flagged")
    model_version: str
    li_refused_until: str | None = Field(default=None, description=(
        "flagged on the pool with customer_id and vm_type given: until when (UTC, ISO 8601) their next VMs get no LI "
        "call; null otherwise"))


class ModelInfo(BaseModel):
    version: str
    as_of: str | None
    li_sha256: str
    um_sha256: str
    monitor_sha256: str | None = Field(default=None, description="null: no monitor model, /v1/qos uses the LI model")
    history_keys: int
    customers: int
    prefilled_shapes: int = 0
    snapshot_time: str | None
    loaded_at: str
    source: str
    policy: Policy
