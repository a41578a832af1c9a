"""A bundle's values are checked before they are served: policy fields typed and in range, the
snapshot's files pinned by sha256; a refusal names the file and the field, and the service keeps
serving the bundle it has."""

from __future__ import annotations

import gc
import json
import shutil
import weakref
from dataclasses import replace

import pandas as pd
import pytest

from pond.core.errors import ModelError
from pond.models.policy import Serve
from pond.serving.engine import Engine
from pond.serving.observability import Metrics
from pond.serving.reload import EngineHolder, FileSource
from tests.serving.conftest import bundle_paths


@pytest.fixture()
def paths(small_bundle, tmp_path):
    """The small bundle with its policy and snapshot copied where a test may spoil them."""
    shutil.copy2(small_bundle / "policy.json", tmp_path / "policy.json")
    shutil.copytree(small_bundle / "features" / "snapshot", tmp_path / "snapshot")
    return replace(bundle_paths(small_bundle), policy=tmp_path / "policy.json", snapshot_dir=tmp_path / "snapshot")


def _edit_policy(paths, edit) -> None:
    policy = json.loads(paths.policy.read_text())
    edit(policy)
    paths.policy.write_text(json.dumps(policy))


@pytest.mark.parametrize("edit, field", [
    (lambda p: p["li"].update(threshold=-1), "li.threshold"),
    (lambda p: p["li"].update(threshold=float("nan")), "li.threshold"),
    (lambda p: p["um"].update(offset=-5), "um.offset"),
    (lambda p: p["um"].update(offset="0.1"), "um.offset"),
    (lambda p: p.pop("um"), "um"),
    (lambda p: p.update(surprise=1), "surprise"),
    (lambda p: p["li"].update(model="../../um/um.onnx"), "li.model"),
    (lambda p: p["li"].update(sha256="abc"), "li.sha256"),
    (lambda p: p["alternatives"]["li_only"].update(li_threshold=2), "alternatives.li_only.li_threshold"),
    (lambda p: p.update(tp=250), "tp"),
    (lambda p: p["serve"].update(policy="everything_on_the_pool"), "serve.policy"),
    (lambda p: p["serve"].update(pool_cap=0), "serve.pool_cap"),
])
def test_policy_values_are_checked(paths, edit, field):
    Engine.load(paths)                      # the untouched copy loads
    _edit_policy(paths, edit)
    with pytest.raises(ModelError, match=f"field {field}:") as err:
        Engine.load(paths)
    assert str(paths.policy) in str(err.value)


def test_a_policy_from_before_the_serve_setting_serves_ponds_rule(paths):
    _edit_policy(paths, lambda p: p.pop("serve"))
    eng = Engine.load(paths)
    assert eng.policy.serve == Serve(policy="combined", pool_cap=None) and eng.policy_summary["served"] == "combined"
    assert eng.knobs.li_threshold == eng.policy.li.threshold and eng.knobs.pool_cap is None


def test_unreadable_policy_names_the_file(paths):
    paths.policy.write_text('{"li": ')
    with pytest.raises(ModelError, match="is not readable JSON") as err:
        Engine.load(paths)
    assert str(paths.policy) in str(err.value)


def test_an_altered_snapshot_is_refused(paths):
    cust = pd.read_parquet(paths.snapshot_dir / "customer_percentiles.parquet")
    cust.assign(cust_p50=0.99).to_parquet(paths.snapshot_dir / "customer_percentiles.parquet")
    with pytest.raises(ModelError, match="customer_percentiles.parquet: missing, or its sha256 differs"):
        Engine.load(paths)


def test_the_served_engine_is_frozen_out_of_the_collector_and_a_replaced_one_is_freed(paths):
    """A full collection walks every tracked object; the served engine's are frozen once loaded (``settle_heap``),
    and a swap unfreezes them first, so that the cycles of the engine it replaces are still freed."""
    class Node:
        pass

    holder = EngineHolder(FileSource(paths, 0.5), Metrics())
    first, node = Engine.load(paths, 0.5), Node()
    node.me = node                                   # a cycle: only the collector frees it
    object.__setattr__(first, "_test_cycle", node)   # (the engine is a frozen dataclass)
    held = weakref.ref(node)
    del node
    holder.swap(first)
    assert gc.get_freeze_count() > 0
    assert not any(o is first for o in gc.get_objects())             # frozen: out of every generation
    del first
    holder.swap(Engine.load(paths, 0.5))
    gc.collect()
    assert held() is None
    assert not any(o is holder.engine for o in gc.get_objects())


def test_hot_reload_keeps_serving_the_old_bundle(paths):
    holder = EngineHolder(FileSource(paths, 0.5), Metrics())
    assert holder.refresh() and holder.engine is not None
    served = holder.engine
    _edit_policy(paths, lambda p: p["li"].update(threshold=-1))
    assert holder.refresh() is False and holder.engine is served
    assert "field li.threshold" in holder.last_error
