"""``POST /v1/allocations`` and ``POST /v1/allocations/batch``: the scheduler's calls (docs/design.md, The HTTP API).

A valid single request is answered by ``serving.hot`` before it reaches this router; the route here answers
the rest alike (a refusal, a body sent in chunks) and documents the call in the OpenAPI schema. The batch
parses, validates and decides in a worker thread: one large or malformed batch costs bounded work and leaves
the event loop to the other clients.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from pond.core.errors import ContractError
from pond.serving.batch import columns, invalid_body, parse_batch
from pond.serving.columnar import ARROW_STREAM, is_arrow, read_requests, write_allocations
from pond.serving.dependencies import CurrentEngine, Service, ServiceDep
from pond.serving.engine import Engine
from pond.serving.hot import PATH, request_fields
from pond.serving.responses import allocation_rows, json_response
from pond.serving.schemas import Allocation, AllocationRequest, BatchRequest, BatchResponse

BATCH_PATH = "/v1/allocations/batch"
ARROW_PATHS = frozenset({BATCH_PATH})

router = APIRouter()

_SINGLE_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": AllocationRequest.model_json_schema()}}}}
_BATCH_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": BatchRequest.model_json_schema(ref_template="#/components/schemas/{model}")},
    ARROW_STREAM.decode(): {"schema": {"type": "string", "format": "binary",
                                       "description": "an Arrow IPC stream of the request columns"}}}}}


@router.post(PATH, response_model=Allocation, openapi_extra=_SINGLE_BODY, summary="Size one VM request",
             description="The scheduler's call: how much of the VM's memory is local and how large its pool share "
                         "is (`decision`: pool_only, znuma or local_only), by the served policy. A body that is not "
                         "a valid request is refused with a 422 naming the field; one over the size limit with a "
                         "413.")
async def allocate(request: Request, eng: CurrentEngine, svc: ServiceDep) -> Response:
    """One VM request, on the event loop: tens of microseconds of work cost less than a thread hop."""
    try:
        fields = request_fields(await request.body())
    except ValidationError as exc:
        raise invalid_body(exc) from None
    return Response(svc.answers.json(eng, fields), media_type="application/json")


@router.post(BATCH_PATH, response_model=BatchResponse, openapi_extra=_BATCH_BODY, summary="Size many VM requests",
             description="Up to `POND_MAX_BATCH` requests in one call, answered in their order, as JSON or as an "
                         "Arrow IPC stream (the answer in the format of the request). More requests than the "
                         "limit are refused with a 413 before any is validated.")
async def allocate_batch(request: Request, eng: CurrentEngine, svc: ServiceDep) -> Response:
    """Up to ``max_batch`` VMs; the request count is checked before any element is validated."""
    arrow = is_arrow(request.headers.get("content-type", "").encode())
    return await asyncio.to_thread(_arrow if arrow else _json, svc, eng, await request.body())


def _json(svc: Service, eng: Engine, body: bytes) -> Response:
    requests = parse_batch(body, svc.settings.max_batch)
    if not requests:
        return json_response({"allocations": []})
    cols = columns(requests)
    return json_response({"allocations": allocation_rows(cols, svc.decide(eng, cols), eng)})


def _arrow(svc: Service, eng: Engine, body: bytes) -> Response:
    """The same batch as an Arrow IPC stream, answered as one (``serving.columnar``)."""
    try:
        cols = read_requests(body, svc.settings.max_batch)
    except ContractError as exc:
        status = 413 if exc.column == "requests" else 422
        loc = ["body"] if exc.column == "body" else ["body", "requests"] + [exc.column] * (status == 422)
        return json_response({"detail": [{"loc": loc, "msg": str(exc), "type": "too_large" if status == 413 else
                                          "value_error"}]}, status)
    out = svc.decide(eng, cols)
    return Response(write_allocations(cols, out, eng.version, eng.policy_summary), media_type=ARROW_STREAM.decode())
