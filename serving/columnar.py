"""A batch as an Arrow IPC stream (``application/vnd.apache.arrow.stream``), answered in the same format: for
schedulers that send thousands of VMs at once, without a JSON object per VM either way.

The request columns are the JSON route's fields (``telemetry.request.FIELDS``), one row per VM, under the same
rules (``telemetry.request.check_frame``, as `pond predict` applies them): text fields are Arrow strings, vcpus
and memory_gb numbers, not booleans; a column the route does not know is refused, as the JSON route refuses a
field. The answer has the JSON route's fields per VM, in request order, with the policy (one per answer) in the
schema's metadata under ``policy``, as JSON.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.types as pat

from pond.core.errors import ContractError
from pond.serving.hot import media_type
from pond.telemetry import request

ARROW_STREAM = b"application/vnd.apache.arrow.stream"
NUMBERS = ("vcpus", "memory_gb")


def is_arrow(content_type: bytes) -> bool:
    return media_type(content_type) == ARROW_STREAM


def _problem(column: str, problem: str, fix: str = "") -> ContractError:
    return ContractError(request.TABLE, problem, column=column, fix=fix)


def read_requests(body: bytes, max_batch: int) -> dict[str, Any]:
    """The batch's request columns as the engine takes them (``request.columns_of``), checked by the request
    rules; ContractError names the column."""
    try:
        table = pa.ipc.open_stream(body).read_all()
    except (pa.ArrowInvalid, pa.ArrowTypeError, OSError) as exc:
        raise _problem("body", f"not an Arrow IPC stream ({str(exc).splitlines()[0][:120]})",
                       fix="send one record batch stream (pyarrow.ipc.new_stream) of the request columns") from None
    if table.num_rows > max_batch:
        raise _problem("requests", f"{table.num_rows} requests; at most {max_batch} per batch")
    extra = [c for c in table.column_names if c not in request.FIELDS]
    if extra:
        raise _problem(extra[0], "Extra inputs are not permitted", fix=f"send only {list(request.FIELDS)}")
    for name in table.column_names:
        kind = table.schema.field(name).type
        if pat.is_dictionary(kind):
            kind = kind.value_type
        if name in request.TEXT_FIELDS and not (pat.is_string(kind) or pat.is_large_string(kind) or pat.is_null(kind)):
            raise _problem(name, f"must be an Arrow string column, not {kind}")
        if name in NUMBERS and not (pat.is_integer(kind) or pat.is_floating(kind)):
            raise _problem(name, f"must be an Arrow integer or floating column, not {kind}")
    df = table.to_pandas(types_mapper={pa.string(): pd.StringDtype(), pa.large_string(): pd.StringDtype()}.get)
    df = request.strip_matched(df)
    request.check_frame(df, request.TABLE)
    return request.columns_of(df)


def write_allocations(cols: dict[str, Any], out: dict[str, np.ndarray], version: str, policy: dict) -> bytes:
    """The answer as an Arrow IPC stream: the JSON route's fields, one row per request (NaN P(insensitive) is
    null), the policy in the schema's metadata."""
    n = len(cols["vm_id"])
    p = out["p_insensitive"]
    table = pa.table({
        "vm_id": pa.array(cols["vm_id"], pa.string()),
        "decision": pa.array(np.asarray(out["decision"]).astype(str), pa.string()),
        **{k: pa.array(np.asarray(out[k], np.float64)) for k in ("memory_gb", "local_gb", "pool_gb", "znuma_gb")},
        "p_insensitive": pa.array(p, pa.float64(), mask=np.isnan(p)),
        "untouched_fraction": pa.array(np.asarray(out["untouched_fraction"], np.float64)),
        "has_history": pa.array(np.asarray(out["has_history"], bool)),
        "customer_history": pa.array(np.asarray(out["customer_history"], bool)),
        "model_version": pa.array([version] * n, pa.string()),
    }).replace_schema_metadata({"policy": json.dumps(policy)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()
