"""``policy.json`` as the typed ``Policy`` end to end: read, used and written as one checked type."""

from __future__ import annotations

import json

import pytest

from pond.core.errors import ModelError
from pond.models.decision import PolicyKnobs, policy_knobs, served_name
from pond.models.policy import Policy, read_policy, write_policy

SHA = "ab" * 32
WRITTEN = {   # what optimize sets when the QoS monitor is off: no monitor counts, no fleet reports
    "as_of": "2026-01-28", "pdm": 5.0, "tp": 98.0, "latency_ratio": 1.82, "confidence": 0.95, "history_share": 0.9,
    "misprediction_budget": 0.02,
    "li": {"enabled": True, "threshold": 0.77, "model": "li_r1.82_pdm5.onnx", "sha256": SHA, "method": "random_forest",
           "features": ["rate:INST_RETIRED.ANY"], "classes": [0, 1], "expected_li": 0.3, "expected_fp": 0.002,
           "fp_bound": 0.01, "error_rate": 0.007, "lab_called": 40, "lab_errors": 1, "fleet_called": 0,
           "fleet_errors": 0.0},
    "fleet_monitor": {"vms_watched": 0, "flag_rate": None, "mitigation_spare": None},
    "um": {"enabled": True, "target_op": 0.01, "offset": 0.1, "model": "um.onnx", "sha256": SHA, "expected_um": 0.2,
           "expected_op": 0.008, "op_bound": 0.012},
    "expected": {"pool_share": 0.45, "mispredictions": 0.008, "mispredictions_bound": 0.016},
    "alternatives": {"li_only": {"li_threshold": 0.77, "um_offset": None, "um_target_op": 0.0,
                                 "expected_pool_share": 0.33},
                     "um_only": {"li_threshold": None, "um_offset": 0.09, "um_target_op": 0.01,
                                 "expected_pool_share": 0.17}},
    "serve": {"policy": "um_only", "pool_cap": None},
}


def test_a_written_policy_holds_what_was_set_and_reads_back_the_same(tmp_path):
    policy = Policy.model_validate(WRITTEN)
    write_policy(tmp_path / "policy.json", policy)
    assert json.loads((tmp_path / "policy.json").read_text()) == WRITTEN     # no default claimed as measured
    again = read_policy(tmp_path / "policy.json")
    assert again == policy and again.fleet_monitor.vms_flagged == 0           # the defaults, where read
    write_policy(tmp_path / "again.json", again)
    assert (tmp_path / "again.json").read_bytes() == (tmp_path / "policy.json").read_bytes()


def test_the_knobs_come_from_the_typed_policy():
    policy = Policy.model_validate(WRITTEN)
    knobs = policy_knobs(policy)
    assert knobs["served"] == knobs["um_only"] == PolicyKnobs(None, 0.09)
    assert knobs["combined"] == PolicyKnobs(0.77, 0.1) and served_name(policy) == "um_only"


def test_a_hand_edit_is_refused_naming_the_field(tmp_path):
    (tmp_path / "policy.json").write_text(json.dumps({**WRITTEN, "li": {**WRITTEN["li"], "threshold": -1}}))
    with pytest.raises(ModelError, match="field li.threshold"):
        read_policy(tmp_path / "policy.json")
