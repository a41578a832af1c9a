"""The operator's endpoints: the QoS monitor's check, what is served, the probes and Prometheus metrics."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from fastapi import APIRouter
from starlette.responses import Response

from pond.serving.dependencies import CurrentEngine, ServiceDep
from pond.serving.responses import json_response
from pond.serving.schemas import ModelInfo, QosRequest, QosResponse

router = APIRouter()


@router.post("/v1/qos", response_model=QosResponse, summary="Check a running VM against the PDM",
             description="The QoS monitor: from a VM's counters and the allocation they were counted under, the "
                         "probability that it runs slower than the PDM allows, and `reconfigure_local` when it is "
                         "flagged with memory on the pool. Counters without `allocation` are refused with a 422. "
                         "With `customer_id` and `vm_type`, a flag refuses the LI call to their next VMs for "
                         "`POND_QOS_REFUSAL_HOURS` (`li_refused_until`).")
def qos(req: QosRequest, eng: CurrentEngine, svc: ServiceDep) -> Response:
    """Plain ``def``: FastAPI's thread pool runs it, and ONNX Runtime releases the GIL. A VM flagged on the pool
    whose call names its customer and VM type is remembered (``serving.flag_memory``)."""
    a = req.allocation
    v = eng.qos(req.counters, a.memory_gb, a.pool_gb, a.latency_ratio)
    act = v.exceeds and a.pool_gb > 0
    until = None
    if act and req.customer_id is not None and req.vm_type is not None and svc.flags.enabled:
        t = svc.flags.remember(req.customer_id, req.vm_type)
        until = datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")
    return json_response({"vm_id": req.vm_id, "p_exceeds_pdm": v.p, "exceeds_pdm": v.exceeds,
                          "action": "reconfigure_local" if act else "none", "pdm": v.pdm, "monitor": v.monitor,
                          "threshold": v.threshold, "model_version": eng.version, "li_refused_until": until})


@router.get("/v1/model", response_model=ModelInfo, summary="What is served",
            description="The model version, the models' sha256, the snapshot and the policy the service applies.")
def model(eng: CurrentEngine, svc: ServiceDep) -> Response:
    return json_response({**eng.info, "loaded_at": svc.holder.loaded_at, "source": svc.holder.source.description,
                          "policy": eng.policy.model_dump(mode="json")})


@router.get("/healthz", summary="Liveness", description="200 while the process answers.")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness",
            description="200 with the model version once a bundle is loaded; 503 with the reason before.")
def readyz(svc: ServiceDep) -> Response:
    eng = svc.holder.engine
    if eng is None:
        return json_response({"ready": False, "reason": svc.holder.last_error or "loading"}, 503)
    return json_response({"ready": True, "model_version": eng.version})


@router.get("/metrics", summary="Prometheus metrics",
            description="Requests, decisions and latencies in Prometheus' text format.")
async def prometheus(svc: ServiceDep) -> Response:
    svc.tally.flush()       # on the event loop, the only place the hot path's tally changes
    body, media_type = await asyncio.to_thread(svc.metrics.exposition)
    return Response(body, media_type=media_type)
