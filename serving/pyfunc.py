"""A registered version as an MLflow pyfunc model: ``mlflow.pyfunc.load_model("models:/pond-znuma@champion")``
then ``.predict(requests)`` answers, per request row, what the service would (``pond predict``'s columns).

The version's model directory holds the bundle under ``data/`` (``models.bundle.located`` finds it); MLflow calls
``_load_pyfunc`` with that path. The signature and input example `register` logs are the request columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from pond.models.bundle import BundlePaths
from pond.serving.engine import Engine
from pond.serving.offline import allocations_frame, request_columns
from pond.telemetry import request


class BundleModel:
    """The engine of one bundle behind MLflow's ``predict``: request rows in, allocations out."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def predict(self, model_input: pd.DataFrame, params: dict[str, Any] | None = None) -> pd.DataFrame:
        cols = request_columns(pd.DataFrame(model_input))
        return allocations_frame(cols, self.engine.allocate(cols), self.engine)


def _load_pyfunc(data_path: str) -> BundleModel:
    return BundleModel(Engine.load(BundlePaths.of(Path(data_path))))

SERVE_PACKAGES = ("numpy", "pandas", "pyarrow", "pydantic", "pyyaml", "onnxruntime", "numba")


def log(bundle_dir: Path) -> Any:
    """Log ``bundle_dir`` to the active run as an MLflow model named ``bundle`` (MLflow's ModelInfo): the
    registry shows its request schema and an example, and ``predict`` runs the service's engine. The bundle is
    copied under the name ``bundle`` (the model keeps ``data/<name of the copied folder>``)."""
    import shutil
    import tempfile

    import mlflow
    from mlflow.models import ModelSignature, infer_signature
    from mlflow.types import ColSpec, Schema

    from pond.core.tracking import requirements

    example = pd.read_parquet(Path(bundle_dir) / "sample_requests.parquet").head(3)[list(request.FIELDS)]
    example = example.astype({c: object for c in request.TEXT_FIELDS}).astype({"vcpus": "int64"})
    answers = _load_pyfunc(str(bundle_dir)).predict(example)
    # the contract's request, cluster_id optional (inferring from the example would make it required)
    inputs = Schema([ColSpec("long" if c == "vcpus" else "double" if c == "memory_gb" else "string", c,
                             required=c in request.REQUIRED) for c in request.FIELDS])
    signature = ModelSignature(inputs, infer_signature(answers).inputs)   # the answers' columns
    with tempfile.TemporaryDirectory() as tmp:
        data = shutil.copytree(bundle_dir, Path(tmp) / "bundle")
        return mlflow.pyfunc.log_model(name="bundle", loader_module=__name__, data_path=str(data),
                                       signature=signature, input_example=example,
                                       pip_requirements=requirements(*SERVE_PACKAGES))
