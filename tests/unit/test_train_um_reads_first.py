"""`train_um` reads its rows before it opens an MLflow run: a table it cannot read leaves no failed run."""

from __future__ import annotations

import pandas as pd

from pond.core.errors import ContractError
from pond.core.params import Params
from tests.conftest import params_file, run_pond


def test_an_unreadable_table_leaves_no_mlflow_run(tmp_path, monkeypatch, capsys):
    import mlflow

    from pond.models import um_train

    store = tmp_path / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    features = tmp_path / "features"
    features.mkdir()
    params = Params()
    columns = ["vm_type", "os", "region", "vcpus", "memory_gb", "created_at", "deleted_at", "untouched_fraction",
               *params.features.customer_columns]
    pd.DataFrame({c: [] for c in columns}).to_parquet(features / "vm_features.parquet")

    def unreadable(*args, **kwargs):
        raise ContractError("vm_features", "a row group cannot be decoded", fix="run `pond features` again")

    monkeypatch.setattr(um_train, "read_days", unreadable)
    assert run_pond(["--params", str(params_file(tmp_path / "params.yaml", {})), "train_um", "--features",
                     str(features), "--out", str(tmp_path / "um"), "--metrics", str(tmp_path / "um.json"),
                     "--plots", str(tmp_path / "plots")]) == 2
    assert "cannot be decoded" in capsys.readouterr().err
    assert not (tmp_path / "um").exists()
    if store.exists():   # the store is created by the first run, so a missing one holds none
        mlflow.set_tracking_uri(f"sqlite:///{store}")
        assert mlflow.search_runs(search_all_experiments=True).empty
