"""A batch body's requests, read with bounded work before the models see them (``POST /v1/allocations/batch``).

HTTP errors are not raised here: a refusal is a ``RequestValidationError`` (422) or ``TooLarge`` (413), which
the app's handlers answer."""

from __future__ import annotations

import numpy as np
import orjson
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from pydantic_core import from_json

from pond.core.errors import PondError
from pond.serving.hot import NULLABLE
from pond.serving.schemas import MAX_COUNTERS, AllocationRequest
from pond.telemetry.request import FIELDS as REQUEST_FIELDS
from pond.telemetry.request import plain_request

MAX_ERRORS = 20     # a 422 lists at most this many problems
_REQUESTS = TypeAdapter(list[AllocationRequest])


class TooLarge(PondError):
    """More requests, or more values, than a batch may hold (answered 413 with ``loc``: body, requests)."""


VALUES_PER_REQUEST = 9 + MAX_COUNTERS     # a request's fields, and its counters map at most
VALIDATE_CHUNK = 256                      # requests per validation call: the GIL is free between calls


def structure(body: bytes) -> tuple[int, int]:
    """(objects, values) of a JSON body: its ``{`` and ``,`` outside strings (vectorized, about
    30 ms for 4 MB). Escaped backslashes and quotes are removed first, so quotes toggle strings."""
    a = np.frombuffer(body.replace(b"\\\\", b"").replace(b'\\"', b""), np.uint8)
    outside = ~np.bitwise_xor.accumulate(a == ord('"'))
    return int(np.count_nonzero((a == ord("{")) & outside)), int(np.count_nonzero((a == ord(",")) & outside)) + 1


def _over(objects: int, values: int, max_batch: int) -> bool:
    return objects > 2 * max_batch + 1 or values > VALUES_PER_REQUEST * objects + 16


def parse_batch(body: bytes, max_batch: int) -> list[tuple]:
    """A batch body's requests (each its ``telemetry.request.FIELDS`` values), with bounded work whatever the
    body holds.

    Parsing JSON and validating are single C calls that hold the GIL, so their size is bounded
    before they start: a body of ``max_batch`` requests holds at most two objects per request (it
    and its counters) and ``VALUES_PER_REQUEST`` values per object. A raw byte count checks that
    in milliseconds; when braces or commas inside strings (braced GUIDs, ids with commas) push it
    over, the exact count outside strings decides. Then the requests are read by the rules' fast
    path; those it declines are validated in chunks of the batch, and the first chunk with an error
    ends the work.
    """
    if _over(body.count(b"{"), body.count(b",") + 1, max_batch) and _over(*structure(body), max_batch):
        objects, _ = structure(body)
        raise TooLarge(f"more than {max_batch} requests; at most {max_batch} per batch"
                         if objects > 2 * max_batch + 1 else
                         "the body holds more values than its requests can; send {\"requests\": [objects]}")
    data = _loads(body)
    items = data.get("requests") if isinstance(data, dict) else None
    if not isinstance(items, list):     # one error at the top (the counts above bound what is inside)
        where = ("body", "requests") if isinstance(data, dict) else ("body",)
        raise RequestValidationError([{"loc": where, "type": "value_error",
                                       "msg": 'expected {"requests": [request, ...]}'}])
    extra = [k for k in data if k != "requests"]
    if extra:                           # as the single route refuses a field it does not know (BatchRequest)
        raise RequestValidationError([{"loc": ("body", k), "msg": "Extra inputs are not permitted",
                                       "type": "extra_forbidden"} for k in extra[:MAX_ERRORS]])
    if len(items) > max_batch:
        raise TooLarge(f"{len(items)} requests; at most {max_batch} per batch")
    out = [plain_request(item, NULLABLE) for item in items]    # the rules' fast path (telemetry.request)
    for start in range(0, len(items), VALIDATE_CHUNK):
        declined = [i for i in range(start, min(start + VALIDATE_CHUNK, len(items))) if out[i] is None]
        if not declined:
            continue
        try:
            valid = _REQUESTS.validate_python([items[i] for i in declined])
        except ValidationError as exc:      # an accepted request has no error: the chunk's errors, in order
            raise RequestValidationError([{**e, "loc": ("body", "requests", declined[e["loc"][0]], *e["loc"][1:])}
                                          for e in exc.errors()[:MAX_ERRORS]]) from None
        for i, r in zip(declined, valid):
            out[i] = tuple(getattr(r, f) for f in REQUEST_FIELDS)
    return out


def _loads(body: bytes) -> object:
    """The decoded body. orjson refuses ``NaN``, ``Infinity`` and numbers past a double, which the single route's
    parser (pydantic's) reads; read the same way here, a request carrying one is refused where it is
    (``requests[1].counters``), not as a body that is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        try:
            return from_json(body, allow_inf_nan=True)
        except ValueError:
            raise RequestValidationError([{"loc": ("body",), "msg": f"invalid JSON ({exc})",
                                           "type": "json_invalid"}]) from None


def invalid_body(exc: ValidationError) -> RequestValidationError:
    """pydantic's errors on a raw JSON body, located under ``body`` as FastAPI locates them."""
    return RequestValidationError([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])


def columns(requests: list[tuple]) -> dict[str, list]:
    """Validated requests (``telemetry.request.FIELDS`` values each) as the engine's request columns."""
    return {c: list(values) for c, values in zip(REQUEST_FIELDS, zip(*requests))}
