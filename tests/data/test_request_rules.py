"""``plain_request`` (the scheduler's fast path) accepts only what ``VmRequest`` accepts, with the same values."""

from __future__ import annotations

import json

import numpy as np
import orjson
from pydantic import ValidationError

from pond.telemetry.request import FIELDS, ID_MAX_LEN, NAME_MAX_LEN, VM_TYPE_MAX_LEN, VmRequest, plain_request

LONG = ID_MAX_LEN
# raw JSON literals per field: valid, at the limits, one past them, other types, spaces of every kind
TEXT = ['"a"', '"cust-1"', '" cust-1 "', '""', '" "', '"\\t"', '"\\u001c"', '"\\u001cx"', '"x\\u2003"',
        '"\\u2003"', '"\\u00e9t\\u00e9"', '"été"', '"\\u0000"', '"a\\"b"', "null", "1", "true", '["a"]', '{"a": 1}',
        f'"{"x" * NAME_MAX_LEN}"', f'"{"x" * (NAME_MAX_LEN + 1)}"', f'"{"x" * VM_TYPE_MAX_LEN}"',
        f'"{"x" * (VM_TYPE_MAX_LEN + 1)}"', f'"{"x" * LONG}"', f'"{"x" * (LONG + 1)}"', f'" {"x" * LONG} "',
        '"\\ud800"']
VCPUS = ["1", "0", "1024", "1025", "4", "4.0", "4.5", '"4"', "true", "null", "-1", "18446744073709551616",
         "1e400", "2e0", "-0"]
MEMORY = ["1", "0", "0.5", "65536", "65536.0", "65536.00000001", '"8"', "true", "null", "-1.0", "NaN",
          "Infinity", "1e-320", "1e400", "3.0000000000000001", "0.1", "18446744073709551616", "-0.0"]
CLUSTER = [None, "null", '"c1"', '" "', '""', '" c1 "', f'"{"x" * (LONG + 1)}"', "5", '"é"', '"\\u2003c"']


def _bodies(n: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    pick = lambda pool: pool[rng.integers(len(pool))]
    bodies = []
    for _ in range(n):
        fields = {"vm_id": pick(TEXT), "customer_id": pick(TEXT), "vm_type": pick(TEXT), "vcpus": pick(VCPUS),
                  "memory_gb": pick(MEMORY), "os": pick(TEXT), "region": pick(TEXT), "cluster_id": pick(CLUSTER)}
        for name in ("vm_id", "customer_id", "vm_type", "os", "region"):   # most fields valid, to reach deep rules
            if rng.random() < 0.85:
                fields[name] = json.dumps(pick(["vm-1", " cust-2", "D4s_v3", "linux", "eastus", "a b"]))
        if rng.random() < 0.6:
            fields["vcpus"], fields["memory_gb"] = pick(["2", "4", "64"]), pick(["8", "16.0", "3.5"])
        if rng.random() < 0.05:
            del fields[pick(list(FIELDS))]
        if rng.random() < 0.05:
            fields["counters"] = "null"
        parts = [f'"{k}": {v}' for k, v in fields.items() if v is not None]
        bodies.append(("{" + ", ".join(parts) + "}").encode())
    return bodies


def _vm_request(body: bytes) -> tuple | None:
    try:
        r = VmRequest.model_validate_json(body)
    except ValidationError:
        return None
    return tuple(getattr(r, f) for f in FIELDS)


def test_the_fast_path_accepts_only_what_the_model_accepts_with_the_same_values():
    accepted = declined_valid = 0
    for body in _bodies(10000, seed=7):
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            assert _vm_request(body) is None or b"18446744073709551616" in body, body   # pydantic decides alone
            continue
        fast, slow = plain_request(obj), _vm_request(body)
        if fast is not None:
            accepted += 1
            assert slow is not None, body
            assert fast == slow and [type(v) for v in fast] == [type(v) for v in slow], body
        elif slow is not None:
            declined_valid += 1
    assert accepted > 1500 and declined_valid > 0     # the draw reaches both sides of the fast path


def test_a_route_field_is_allowed_only_when_null():
    body = {"vm_id": "v", "customer_id": " c ", "vm_type": "t", "vcpus": 2, "memory_gb": 4, "os": "l", "region": "r"}
    assert plain_request(body) == ("v", "c", "t", 2, 4.0, "l", "r", None)
    assert plain_request({**body, "counters": None}) is None
    assert plain_request({**body, "counters": None}, frozenset({"counters"})) == plain_request(body)
    assert plain_request({**body, "counters": {}}, frozenset({"counters"})) is None
    assert plain_request({**body, "cluster_id": " k "})[-1] == "k"
    assert plain_request({**body, "vcpus": True}) is None and plain_request([body]) is None
