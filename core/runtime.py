"""The environment variables the pipeline reads, one typed model: each variable's name, default and
meaning are written here once, every reader goes through ``Runtime.now()``, and the configuration reference
(`pond docs`) lists them from this model. The service's own variables are ``serving.settings.Settings``.

Read when used, not at import: a command sets some of them for what it runs (``pond --quiet``, ``--scheduler``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Runtime(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    mlflow_tracking_uri: str | None = Field(
        None, alias="MLFLOW_TRACKING_URI",
        description="every stage and `pond serve`: the MLflow tracking server and registry; unset: SQLite "
                    "under data/mlflow (`POND_MLFLOW_TRACKING_URI` wins for the service)")
    mlflow_experiment: str | None = Field(None, alias="POND_MLFLOW_EXPERIMENT",
                                          description="train_li, train_monitor, train_um, backtest, register: the "
                                                      "MLflow experiment runs are logged to (unset: pond, and "
                                                      "pond-backtest for the runs backtest trains)")
    mlflow_disable_telemetry: str = Field(
        "true", alias="MLFLOW_DISABLE_TELEMETRY",
        description="set for MLflow when a run starts: its usage telemetry stays off unless this is false")
    omp_spin: str = Field(
        "1000", alias="GOMP_SPINCOUNT",
        description="set for OpenMP (LightGBM, scikit-learn: GNU libgomp) when a command starts, unless "
                    "OMP_WAIT_POLICY is set: how long its idle threads spin before they sleep. libgomp's 300,000 "
                    "stalls two jobs on the same cores (`python -m benchmarks.omp_wait`, docs/production.md)")
    duckdb_memory: str = Field("2GB", alias="POND_DUCKDB_MEMORY",
                               description="features, backtest: DuckDB's memory cap; joins past it spill to disk")
    duckdb_temp: str | None = Field(
        None, alias="POND_DUCKDB_TEMP",
        description="where DuckDB spills joins past POND_DUCKDB_MEMORY (unset: .tmp in the working directory); "
                    "a fleet-sized join can spill tens of GB")
    quiet: bool = Field(False, alias="POND_QUIET", description="no progress lines (`pond --quiet` sets it)")
    dask_scheduler_address: str | None = Field(
        None, alias="DASK_SCHEDULER_ADDRESS",
        description="with `engine.backend: dask`, a running Dask scheduler (tcp://host:8786; `pond --scheduler` "
                    "sets it); unset: the stage starts a LocalCluster")
    scratch: str | None = Field(
        None, alias="POND_SCRATCH",
        description="with `engine.backend: dask`, where the workers exchange files: a path every worker sees, or "
                    "a storage URL (s3://bucket/scratch; raw tables on this machine's disk are copied there "
                    "first); unset: the output's temporary folder")
    prometheus_multiproc_dir: str | None = Field(
        None, alias="PROMETHEUS_MULTIPROC_DIR",
        description="`pond serve --workers N` (N > 1): where the workers' metric files are summed from; unset: a "
                    "new temporary directory")

    @field_validator("quiet", mode="before")
    @classmethod
    def _quiet(cls, value: object) -> bool:
        """Any value but empty, 0, false or no silences (as before this model)."""
        return str(value).strip().lower() not in ("", "0", "false", "no")

    @field_validator("mlflow_tracking_uri", "duckdb_temp", "dask_scheduler_address", "scratch",
                     "prometheus_multiproc_dir", mode="before")
    @classmethod
    def _unset_when_empty(cls, value: object) -> object:
        return value or None

    @classmethod
    def now(cls, environ: Mapping[str, str] | None = None) -> Runtime:
        """The variables as the process's environment (or ``environ``) holds them now."""
        env = os.environ if environ is None else environ
        return cls.model_validate({f.alias: env[f.alias] for f in cls.model_fields.values() if f.alias in env})

    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of ``field``."""
        return cls.model_fields[field].alias or field

    @classmethod
    def openmp(cls, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """What a command sets before OpenMP starts (it reads its variables once): the spin count, unless the
        operator chose a wait policy, which libgomp would let a spin count override."""
        env = os.environ if environ is None else environ
        return {} if "OMP_WAIT_POLICY" in env else {cls.variable("omp_spin"): cls.now(env).omp_spin}
