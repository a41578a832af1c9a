"""The engine gives evaluate's answers, through inputs encoded exactly as the UM model was trained."""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.um import encode, metadata_frame
from serving.engine import REQUEST_COLUMNS
from serving.offline import allocations_frame, request_columns


def _cols(vms: pd.DataFrame) -> dict[str, list]:
    return request_columns(vms[[*REQUEST_COLUMNS, "cluster_id"]])


def test_um_inputs_equal_training_encoding(engine, next_day_vms):
    X = engine.um_inputs(_cols(next_day_vms))
    expected = encode(metadata_frame(next_day_vms), engine.models.um_vocabulary)
    np.testing.assert_array_equal(X, expected)   # NaN == NaN here; identical float32 bits otherwise


def test_allocations_equal_evaluate_decisions(engine, next_day_vms, small_bundle):
    cols = _cols(next_day_vms)
    got = allocations_frame(cols, engine.allocate(cols), engine).set_index("vm_id")
    ev = pd.read_parquet(small_bundle / "evaluation" / "decisions.parquet").set_index("vm_id")
    got = got.loc[ev.index]                     # evaluate keeps the VMs that ended
    assert len(ev) > 100
    for c in ("decision", "pool_gb", "znuma_gb", "has_history"):
        assert got[c].tolist() == ev[c].tolist(), c
    np.testing.assert_array_equal(got.p_insensitive.to_numpy(), ev.p_insensitive.to_numpy())
    np.testing.assert_array_equal(got.untouched_fraction.to_numpy(), ev.untouched_pred.to_numpy())
    assert (got.local_gb + got.pool_gb == got.memory_gb).all()
    assert set(got.decision) == {"pool_only", "znuma", "local_only"}


def test_unknown_customer_takes_the_no_history_path(engine, next_day_vms):
    vm = next_day_vms.iloc[[0]].assign(customer_id="never-seen", vm_id="x")
    out = engine.allocate(_cols(vm))
    assert not out["has_history"][0] and not out["customer_history"][0]
    assert np.isnan(out["p_insensitive"][0]) and out["decision"][0] != "pool_only"
    # the UM model still answers: no ended VMs (cust_n = 0), percentiles missing, as in training
    X = engine.um_inputs(_cols(vm))
    assert X[0, -6] == 0 and np.isnan(X[0, -5:]).all() and np.isfinite(out["untouched_fraction"][0])


def test_batch_of_one_equals_batch(engine, next_day_vms):
    cols = _cols(next_day_vms.head(50))
    whole = engine.allocate(cols)
    for i in (0, 17, 49):
        one = engine.allocate({k: (v[i:i + 1] if v is not None else None) for k, v in cols.items()})
        for k in ("decision", "pool_gb", "local_gb", "untouched_fraction"):
            assert one[k][0] == whole[k][i], k
