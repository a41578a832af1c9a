"""`pond predict` and `pond serve`: the engine from files, offline or behind HTTP.

Settings come from ``serving.settings.Settings``: a command-line option wins over its ``POND_*``
environment variable, which wins over the default. Options are built from the settings' own
fields, so their help shows the same names and defaults the service uses.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pond.core.errors import ConfigError
from pond.core.params import explain
from pond.core.runtime import Runtime
from pond.serving.settings import Settings

# (option, settings field, type): the path options first (predict takes those four)
SETTING_OPTIONS = (("policy", "policy", Path), ("li", "li_dir", Path), ("um", "um_dir", Path),
                   ("snapshot", "snapshot_dir", Path), ("monitor", "monitor_dir", Path), ("host", "host", str),
                   ("port", "port", int), ("workers", "workers", int))


def add_setting_options(parser: argparse.ArgumentParser, options: tuple = SETTING_OPTIONS) -> None:
    for option, field, kind in options:
        default = Settings.model_fields[field].default
        parser.add_argument(f"--{option}", type=kind, default=None, dest=field,
                            help=f"(env {Settings.env_var(field)}; default {default})")


def environment_help() -> str:
    """The settings with no option (environment only), for ``pond serve --help``."""
    lines = ["settings read from the environment only (docs/configuration.md lists them all):"]
    options = {field for _, field, _ in SETTING_OPTIONS}
    for name, info in Settings.model_fields.items():
        if name not in options:
            default = "unset" if info.default is None else info.default
            lines.append(f"  {Settings.env_var(name):27s} {info.description} (default {default})")
    return "\n".join(lines)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    return {f: getattr(args, f) for _, f, _ in SETTING_OPTIONS if getattr(args, f, None) is not None}


def settings_from(args: argparse.Namespace) -> Settings:
    """Options given on the command line, over the environment, over the defaults."""
    given = _given(args)
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ConfigError(explain(exc, "", "setting", "correct the option or its POND_* variable")) from None


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if args.stage == "predict":
        from pond.serving.engine import Engine
        from pond.serving.offline import predict_file

        engine = Engine.load(settings.bundle_paths(), settings.qos_threshold)
        frame = predict_file(engine, args.requests, args.out)
        counts = frame.decision.value_counts().to_dict()
        print(f"predict: {len(frame)} allocations -> {args.out} (model {engine.version}; {counts})")
        return 0
    settings.bearer_token()              # refuse a bad token here, before any worker starts
    for field, value in _given(args).items():   # workers read POND_* (serving.app.app_from_environment)
        os.environ[Settings.env_var(field)] = str(value)
    if settings.workers > 1:
        _multiprocess_metrics_dir()
        if settings.qos_flags is None:      # the workers share the monitor's flags (serving.flag_memory)
            os.environ[Settings.env_var("qos_flags")] = str(Path(tempfile.mkdtemp(prefix="pond-flags-")) / "flags.db")
    import uvicorn

    from pond.serving.protocol import PROTOCOL
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    previous = signal.signal(signal.SIGTERM, _stopped)
    try:
        uvicorn.run("pond.serving.app:app_from_environment", factory=True, host=settings.host, port=settings.port,
                    workers=settings.workers, log_level="info", access_log=False, proxy_headers=False,
                    http=PROTOCOL, timeout_graceful_shutdown=settings.shutdown_timeout_s)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


def _stopped(signum: int, frame: object) -> None:
    """SIGTERM outside uvicorn's own handler: before it starts (nothing is served yet), or the signal uvicorn
    raises again once it has shut down cleanly (its default action would end the process with status 143, and
    as PID 1 it would be ignored). Either way the stop was asked for and is done: exit 0."""
    raise SystemExit(0)


def _multiprocess_metrics_dir() -> None:
    """An empty PROMETHEUS_MULTIPROC_DIR for the workers' metric files (serving.observability)."""
    from pond.serving.observability import MULTIPROC_ENV

    given = Runtime.now().prometheus_multiproc_dir
    path = Path(given) if given else Path(tempfile.mkdtemp(prefix="pond-metrics-"))
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):      # values of an earlier run would be summed in
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(path)
