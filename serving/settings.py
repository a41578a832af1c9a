"""Service settings, from the environment (``POND_*``) or arguments; nothing is read at import."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from pond.core.errors import ConfigError
from pond.models.bundle import BundlePaths

MIN_TOKEN_LEN = 16
REGISTRY_BACKOFF_S = 1      # urllib3's back-off factor for registry retries: 0, 2, 4, ... s before each


def backoff_total(retries: int) -> float:
    """Seconds urllib3 sleeps across ``retries`` retries (none before the first; factor x 2^(n-1) after),
    plus MLflow's jitter (up to 1 s each, set to 0 here)."""
    return float(sum(REGISTRY_BACKOFF_S * 2 ** (n - 1) for n in range(2, retries + 1)))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="POND_", extra="forbid", populate_by_name=True)

    policy: Path = Field(default=Path("data/policy/policy.json"), description="the policy `optimize` wrote")
    li_dir: Path = Field(default=Path("data/models/li"), description="the LI models `train_li` wrote")
    um_dir: Path = Field(default=Path("data/models/um"), description="the UM model `train_um` wrote")
    snapshot_dir: Path = Field(default=Path("data/features/snapshot"),
                               description="the nightly snapshot `features` wrote (customer and workload history)")
    monitor_dir: Path = Field(default=Path("data/models/monitor"),
                              description="the QoS monitor's model `train_monitor` wrote; where there is none, /v1/qos "
                                          "scores counters with the LI model")
    registry_model: str | None = Field(default=None,
                                       description="follow models:/<name>@<alias> in MLflow instead of files")
    registry_alias: str = Field(default="champion", description="the alias of the registered model to follow")
    mlflow_tracking_uri: str = Field(default="sqlite:///data/mlflow/mlflow.db",
                                     validation_alias=AliasChoices("POND_MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_URI"),
                                     description="where the registry lives")
    reload_interval_s: float = Field(default=30.0, ge=0, description="poll for a new bundle; 0 = never")
    registry_timeout_s: int = Field(default=5, ge=1, le=300,
                                    validation_alias=AliasChoices("POND_REGISTRY_TIMEOUT_S",
                                                                  "MLFLOW_HTTP_REQUEST_TIMEOUT"),
                                    description="seconds one call to the registry may wait for an answer (also read from "
                                                "`MLFLOW_HTTP_REQUEST_TIMEOUT`)")
    registry_retries: int = Field(default=2, ge=0, le=10,
                                  validation_alias=AliasChoices("POND_REGISTRY_RETRIES",
                                                                "MLFLOW_HTTP_REQUEST_MAX_RETRIES"),
                                  description="retries of a failed registry call (the first at once, then 2 s, 4 s, ... "
                                              "apart); with the timeout, bounds how long a poll takes to count a "
                                              "failure (also read from `MLFLOW_HTTP_REQUEST_MAX_RETRIES`; the "
                                              "service sets `MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR` and "
                                              "`MLFLOW_HTTP_REQUEST_BACKOFF_JITTER` for its own calls)")
    shutdown_timeout_s: float = Field(default=20.0, gt=0, description="on SIGTERM, how long requests in flight may "
                                      "take before their connections are closed (within an orchestrator's 30 s)")
    metrics_flush_s: float = Field(default=1.0, gt=0, le=60, description="add the scheduler's call's counts to "
                                   "/metrics this often (a scrape of the worker that answers is always current)")
    host: str = Field(default="127.0.0.1", description="address to bind; other than loopback requires a token")
    port: int = Field(default=8000, ge=0, le=65535, description="TCP port")
    workers: int = Field(default=1, ge=1, description="processes serving the port; each loads the bundle and "
                                                      "reloads it on its own; /metrics sums them")
    api_token: SecretStr | None = Field(default=None, description="bearer token required on /v1/ and /metrics "
                                                                   "(at least 16 characters)")
    require_auth: bool | None = Field(default=None, description="unset: on unless bound to loopback")
    max_batch: int = Field(default=10_000, ge=1, description="requests per batch call (422 beyond)")
    max_body_mb: float = Field(default=4.0, gt=0, description="largest batch body (413 beyond); 10,000 requests "
                                                                "without counters are 1.6 MB")
    max_request_kb: float = Field(default=64.0, gt=0, description="largest body of one VM's request or QoS call")
    max_header_kb: float = Field(default=32.0, gt=0, description="request line and headers (431 beyond)")
    max_headers: int = Field(default=100, ge=8, description="headers per request (431 beyond)")
    read_timeout_s: float = Field(default=15.0, gt=0, description="a request must arrive whole within this (408)")
    qos_threshold: float = Field(default=0.5, gt=0, le=1,
                                 description="/v1/qos flags a VM when its probability of exceeding the PDM is at least this")
    qos_refusal_hours: float = Field(default=168.0, ge=0, le=24 * 366, allow_inf_nan=False,
                                     description="once /v1/qos flags a VM on the pool whose call names its customer_id "
                                                 "and vm_type, their next VMs get no LI call (the UM split) for this "
                                                 "many hours; 0 = never refused (qos.refusal_hours in the replay)")
    qos_flags: Path | None = Field(default=None, description="a SQLite file the workers share their /v1/qos flags in "
                                   "(and keep them over restarts); unset: each process's own, `pond serve --workers "
                                   "N` makes one for its run")
    opentelemetry: bool = Field(default=False, description="FastAPI's native OpenTelemetry traces/metrics/logs")

    @classmethod
    def env_var(cls, field: str) -> str:
        """The environment variable a field is read from (``POND_<FIELD>``)."""
        return f"{cls.model_config['env_prefix']}{field.upper()}"

    def registry_budget_s(self) -> float:
        """The longest one registry call can take: every attempt times out, with the back-off between them."""
        return float((self.registry_retries + 1) * self.registry_timeout_s + backoff_total(self.registry_retries))

    def bundle_paths(self) -> BundlePaths:
        return BundlePaths(self.policy, self.li_dir, self.um_dir, self.snapshot_dir, self.monitor_dir)

    def auth_required(self) -> bool:
        return self.require_auth if self.require_auth is not None else not is_loopback(self.host)

    def bearer_token(self) -> bytes | None:
        """The token every protected route requires; None when auth is off (loopback or told so).

        With auth on, a missing, empty or short token refuses to start: an empty POND_API_TOKEN
        must never read as "no auth" on an address other machines reach.
        """
        if not self.auth_required():
            return None
        token = self.api_token.get_secret_value() if self.api_token is not None else ""
        if len(token) < MIN_TOKEN_LEN or not token.isprintable() or token != token.strip():
            raise ConfigError(f"serving on {self.host} requires a bearer token of at least {MIN_TOKEN_LEN} printable "
                              f"characters: set POND_API_TOKEN (e.g. `openssl rand -hex 32`), or POND_REQUIRE_AUTH=false "
                              "on a trusted network")
        return token.encode()
