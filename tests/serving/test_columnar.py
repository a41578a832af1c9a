"""The batch as an Arrow IPC stream: the JSON route's answers, field for field, in Arrow, and its
refusals by column."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.serving.conftest import request_of

ARROW = "application/vnd.apache.arrow.stream"


def _stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _post(client, table: pa.Table):
    return client.post("/v1/allocations/batch", content=_stream(table), headers={"content-type": ARROW})


@pytest.fixture()
def requests_(next_day_vms) -> list[dict]:
    reqs = [request_of(r) for r in next_day_vms.head(60).itertuples()]
    reqs[1] = {**reqs[1], "customer_id": "never-seen", "cluster_id": None}
    return reqs


def test_arrow_answers_as_the_json_route_does(client, requests_):
    as_json = client.post("/v1/allocations/batch", json={"requests": requests_}).json()["allocations"]
    r = _post(client, pa.Table.from_pylist(requests_))
    assert r.status_code == 200 and r.headers["content-type"].startswith(ARROW)
    got = pa.ipc.open_stream(r.content).read_all()
    assert json.loads(got.schema.metadata[b"policy"]) == as_json[0]["policy"]
    rows = got.to_pylist()
    assert len(rows) == len(as_json) == 60
    for arrow_row, json_row in zip(rows, as_json):
        assert arrow_row == {k: v for k, v in json_row.items() if k != "policy"}


def test_an_empty_stream_gets_an_empty_answer(client, requests_):
    r = _post(client, pa.Table.from_pylist(requests_).slice(0, 0))
    assert r.status_code == 200 and pa.ipc.open_stream(r.content).read_all().num_rows == 0


@pytest.mark.parametrize("change, status, loc, fragment", [
    (lambda t: t.set_column(t.schema.get_field_index("memory_gb"), "memory_gb",
                            pa.array([0.0] + [8.0] * (len(t) - 1))), 422, "memory_gb", "memory_gb must be a finite"),
    (lambda t: t.set_column(t.schema.get_field_index("vcpus"), "vcpus", pa.array([True] * len(t))), 422, "vcpus",
     "must be an Arrow integer or floating column"),
    (lambda t: t.set_column(t.schema.get_field_index("customer_id"), "customer_id", pa.array(range(len(t)))), 422,
     "customer_id", "must be an Arrow string column"),
    (lambda t: t.append_column("dry_rnu", pa.array([1] * len(t))), 422, "dry_rnu", "Extra inputs are not permitted"),
    (lambda t: t.drop_columns(["region"]), 422, "region", "missing columns ['region']"),
])
def test_a_bad_column_is_refused_by_name(client, requests_, change, status, loc, fragment):
    r = _post(client, change(pa.Table.from_pylist(requests_)))
    assert r.status_code == status
    detail = r.json()["detail"][0]
    assert detail["loc"] == ["body", "requests", loc] and fragment in detail["msg"]


def test_not_a_stream_and_too_many_rows(small_bundle, client, requests_):
    from fastapi.testclient import TestClient

    from pond.serving.app import create_app
    from tests.serving.conftest import settings_for

    r = client.post("/v1/allocations/batch", content=b"not arrow", headers={"content-type": ARROW})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"]
    assert "not an Arrow IPC stream" in r.json()["detail"][0]["msg"]
    with TestClient(create_app(settings_for(small_bundle, max_batch=5))) as small:
        r = _post(small, pa.Table.from_pylist(requests_[:6]))
        assert r.status_code == 413 and r.json()["detail"][0]["loc"] == ["body", "requests"]   # as the JSON route
    r = client.post("/v1/allocations", content=_stream(pa.Table.from_pylist(requests_[:1])),
                    headers={"content-type": ARROW})
    assert r.status_code == 415          # the single route takes JSON only
