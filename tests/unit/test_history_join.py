"""The one join of VMs with the workload history snapshot (scoring and `optimize`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pond.core.errors import ModelError
from pond.models.inference import join_history
from pond.telemetry.request import HISTORY_KEY as KEY


def _frame(keys: list[tuple[str, ...]], **cols) -> pd.DataFrame:
    return pd.DataFrame({**{k: [key[i] for key in keys] for i, k in enumerate(KEY)}, **cols})


def test_each_vm_gets_its_row_in_its_own_order():
    a, b, c = (tuple(f"{x}{i}" for i in range(len(KEY))) for x in "abc")
    vms = _frame([b, c, a, b])
    history = _frame([a, b], n_vms=[3.0, 5.0])
    got = join_history(vms, history)
    assert got[list(KEY)].equals(vms[list(KEY)])
    np.testing.assert_array_equal(got.n_vms.to_numpy(), [5.0, np.nan, 3.0, 5.0])


def test_a_snapshot_with_a_key_twice_is_refused_by_name():
    a, b = (tuple(f"{x}{i}" for i in range(len(KEY))) for x in "ab")
    with pytest.raises(ModelError, match=r"workload history snapshot holds .* more than once .*pond features"):
        join_history(_frame([a, b]), _frame([a, b, a], n_vms=[1.0, 2.0, 3.0]))
