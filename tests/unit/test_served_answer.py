"""``optimize.serve: answer``: the service applies simulate's sizing answer without a hand edit, on any fleet that
runs `simulate` (docs/tonight.md, "Which policy the service applies")."""

from __future__ import annotations

import pytest

from pond.models.names import served_of
from pond.optimize.tonight import served_policy


@pytest.mark.parametrize("row, got", [
    ("combined_cap30pct_r1.82", ("combined", 0.3)),
    ("combined_r2.22", ("combined", None)),
    ("um_only_r1.82", ("um_only", None)),
    ("li_only_cap10pct_r2.22", ("li_only", 0.1)),
    ("all_local", ("all_local", None)),   # the answer where no pool pays
    ("static_15pct", None),               # a static pool is no policy the service has
    ("combined_cap0pct_r1.82", None),     # a cap the service cannot apply
    ("mystery_r1.82", None),
])
def test_a_row_name_is_the_policy_and_cap_the_service_applies(row, got):
    assert served_of(row) == got


def test_the_answer_at_the_policy_s_ratio_is_served():
    answer = {"1.82": {"policy": "combined_cap30pct_r1.82", "decided": False},
              "2.22": {"policy": "um_only_r2.22", "decided": True}}
    policy, cap, why = served_policy("answer", None, answer, 1.82)
    assert (policy, cap) == ("combined", 0.3) and "combined_cap30pct_r1.82 (undecided" in why
    policy, cap, why = served_policy("answer", 0.2, answer, 2.22)     # the answer's cap, not the param's
    assert (policy, cap) == ("um_only", None) and "(decided)" in why


@pytest.mark.parametrize("answer, says", [
    (None, "no sizing answer was given"),
    ({}, "is none (no nightly policy within the budget)"),
    ({"1.82": {"policy": "static_15pct"}}, "is static_15pct"),
])
def test_without_an_answer_the_solver_s_own_rule_is_served(answer, says):
    policy, cap, why = served_policy("answer", None, answer, 1.82)
    assert (policy, cap) == ("combined", None) and says in why


def test_an_operator_s_choice_is_applied_as_given():
    assert served_policy("um_only", None, {"1.82": {"policy": "combined_r1.82"}}, 1.82)[:2] == ("um_only", None)
    assert served_policy("combined", 0.2, None, 1.82)[:2] == ("combined", 0.2)


def test_an_answer_that_buys_no_pool_is_served_as_all_local():
    answer = {"1.82": {"policy": "all_local", "decided": True, "no_pool_for": "combined_r1.82"}}
    policy, cap, why = served_policy("answer", 0.3, answer, 1.82)
    assert (policy, cap) == ("all_local", None) and "all_local (decided)" in why
