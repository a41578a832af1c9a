"""The scheduler's fast path: answers built once per shape, metrics added in bulk, one write per response."""

from __future__ import annotations

import asyncio

import orjson
from prometheus_client import generate_latest

from pond.serving.hot import ANSWER_ENTRIES, Answers, request_fields
from pond.serving.observability import Metrics, Tally, add_observations
from pond.serving.protocol import CoalescedWrites
from pond.serving.responses import allocation_row
from tests.serving.conftest import request_of


def _answers(metrics: Metrics | None = None) -> tuple[Answers, Tally, list]:
    tally, seen = Tally(metrics or Metrics(), "/v1/allocations"), []
    return Answers(allocation_row, tally, seen.append, lambda customer, vm_type: False), tally, seen


def test_answers_are_the_engines_byte_for_byte_and_built_once_per_shape(engine, next_day_vms):
    answers, tally, stage_calls = _answers()
    vms = [request_of(r) for r in next_day_vms.itertuples()]
    vms += [{**vms[0], "vm_id": 'q"uoted\\ \u00e9\u2003'}, {**vms[1], "vcpus": 4.0}]   # escaped id; the long way
    for rounds in (1, 2):
        for vm in vms:
            fields = request_fields(orjson.dumps(vm))
            out = engine.allocate_one(*fields[1:])
            assert answers.json(engine, fields) == orjson.dumps(allocation_row(fields[0], out, engine))
    shapes = {tuple(request_fields(orjson.dumps(vm))[1:]) for vm in vms}
    assert len(stage_calls) == len(shapes) == len(answers.cache)          # the engine ran once per shape
    assert sum(tally.decisions.values()) == sum(tally.um_cache.values()) == 2 * len(vms)


def test_a_new_engine_starts_afresh_and_a_full_cache_empties(engine, next_day_vms, monkeypatch):
    answers, _, stage_calls = _answers()
    fields = request_fields(orjson.dumps(request_of(next(next_day_vms.itertuples()))))
    answers.json(engine, fields)
    answers.json(engine, fields)
    assert len(stage_calls) == 1
    answers.engine = object()           # as if a reload had swapped the engine since
    answers.json(engine, fields)
    assert len(stage_calls) == 2 and answers.engine is engine and len(answers.cache) == 1
    monkeypatch.setattr("pond.serving.hot.ANSWER_ENTRIES", 1)
    other = (*fields[:4], fields[4] + 1, *fields[5:])
    answers.json(engine, other)
    assert list(answers.cache) == [other[1:]] and ANSWER_ENTRIES > len(answers.cache)


def _exposition(metrics: Metrics) -> list[str]:
    return [line for line in generate_latest(metrics.registry).decode().splitlines() if "_created" not in line]


def test_bulk_observations_equal_one_by_one():
    one, bulk = Metrics(), Metrics()
    values = [1e-5, 1e-5, 3e-5, 1e-3, 0.0011, 7.0, 2.5, 0.0, 4e-6]     # bounds themselves, past the last, zero
    for v in values:
        one.latency.labels("/x").observe(v)
    add_observations(bulk.latency.labels("/x"), values)
    add_observations(bulk.latency.labels("/x"), [])
    assert _exposition(one) == _exposition(bulk)


def test_a_tally_adds_its_counts_once():
    metrics = Metrics()
    tally = Tally(metrics, "/v1/allocations")
    tally.latency += [1e-4, 2e-4, 3e-4]
    tally.decisions["znuma"] = 3
    tally.um_cache["hit"], tally.um_cache["miss"] = 2, 1
    tally.flush()
    tally.flush()
    text = "\n".join(_exposition(metrics))
    for line in ('pond_requests_total{endpoint="/v1/allocations",status="200"} 3.0',
                 'pond_request_seconds_count{endpoint="/v1/allocations"} 3.0', 'pond_decisions_total{decision="znuma"} 3.0',
                 'pond_um_cache_total{outcome="hit"} 2.0', 'pond_um_cache_total{outcome="miss"} 1.0'):
        assert line in text, line


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


def test_writes_of_one_loop_turn_leave_in_one_write():
    async def scenario() -> tuple[list, list, list, str]:
        raw = _Transport()
        t = CoalescedWrites(raw, asyncio.get_running_loop())
        t.write(b"HTTP/1.1 200 OK\r\n\r\n")
        t.write(b"{}")
        before = list(raw.writes)
        await asyncio.sleep(0)
        after = list(raw.writes)
        t.write(b"bye")
        t.close()                        # a close sends what is pending first
        await asyncio.sleep(0)
        return before, after, raw.writes, t.get_extra_info("peername")

    before, after, final, info = asyncio.run(scenario())
    assert before == [] and after == [b"HTTP/1.1 200 OK\r\n\r\n{}"]
    assert final == [b"HTTP/1.1 200 OK\r\n\r\n{}", b"bye"] and info == "info peername"


def test_nothing_is_written_to_a_closed_transport():
    async def scenario() -> list:
        raw = _Transport()
        t = CoalescedWrites(raw, asyncio.get_running_loop())
        t.write(b"late")
        raw.closed = True                # the peer went away before the loop turned
        await asyncio.sleep(0)
        return raw.writes

    assert asyncio.run(scenario()) == []


def test_a_batch_validates_only_what_the_fast_path_declines_and_locates_errors_in_the_batch(next_day_vms):
    import pytest
    from fastapi.exceptions import RequestValidationError

    from pond.serving.batch import parse_batch
    from pond.telemetry.request import FIELDS

    day = [request_of(r) for r in next_day_vms.itertuples()]
    vms = [{**day[i % len(day)], "vm_id": f"vm-{i}"} for i in range(400)]
    vms[1] = {**vms[1], "vcpus": float(vms[1]["vcpus"])}           # valid, but only pydantic takes 4.0 vCPUs
    vms[2] = {**vms[2], "vm_id": "v\u00e9"}                          # valid, non-ASCII
    got = parse_batch(orjson.dumps({"requests": vms}), 10_000)
    expected = [tuple(v.get(f) for f in FIELDS) for v in vms]
    assert got == expected and type(got[1][3]) is int
    vms[300] = {**vms[300], "memory_gb": 0}                         # past the first chunk of 256
    with pytest.raises(RequestValidationError) as err:
        parse_batch(orjson.dumps({"requests": vms}), 10_000)
    assert [e["loc"] for e in err.value.errors()] == [("body", "requests", 300, "memory_gb")]


def test_the_periodic_flush_survives_a_failure():
    from pond.serving.app import every

    calls = []

    def work() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise OSError("the metrics folder went away")

    async def scenario() -> None:
        task = asyncio.create_task(every(0.001, work))
        while len(calls) < 3:
            await asyncio.sleep(0.001)
        task.cancel()

    asyncio.run(scenario())
    assert len(calls) >= 3


def test_the_single_route_is_registered_once_beside_its_fast_path():
    """``serving.hot`` answers a valid request; the router's one route answers the rest and documents the call
    (before the service was split into layers, a plain Starlette route was also inserted ahead of the router)."""
    from pond.serving.app import create_app
    from pond.serving.hot import PATH
    from pond.serving.routes import allocations
    from pond.serving.settings import Settings

    app = create_app(Settings())
    assert [getattr(r, "path", None) for r in app.router.routes].count(PATH) == 0
    assert [r.path for r in allocations.router.routes].count(PATH) == 1
    assert "post" in app.openapi()["paths"][PATH]

