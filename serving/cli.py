"""`pond predict` and `pond serve`: the engine from files, offline or behind HTTP.

Settings come from ``serving.settings.Settings``: a command-line option wins over its ``POND_*``
environment variable, which wins over the default. Options are built from the settings' own
fields, so their help shows the same names and defaults the service uses.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError
from core.params import explain
from serving.settings import Settings

# (option, settings field, type): the path options first (predict takes those four)
SETTING_OPTIONS = (("policy", "policy", Path), ("li", "li_dir", Path), ("um", "um_dir", Path),
                   ("snapshot", "snapshot_dir", Path), ("host", "host", str), ("port", "port", int))


def add_setting_options(parser: argparse.ArgumentParser, options: tuple = SETTING_OPTIONS) -> None:
    for option, field, kind in options:
        default = Settings.model_fields[field].default
        parser.add_argument(f"--{option}", type=kind, default=None, dest=field,
                            help=f"(env POND_{field.upper()}; default {default})")


def settings_from(args: argparse.Namespace) -> Settings:
    """Options given on the command line, over the environment, over the defaults."""
    given: dict[str, Any] = {f: getattr(args, f) for _, f, _ in SETTING_OPTIONS if getattr(args, f, None) is not None}
    try:
        return Settings(**given)
    except ValidationError as exc:
        raise ConfigError(explain(exc, "", "setting", "correct the option or its POND_* variable")) from None


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if args.stage == "predict":
        from serving.engine import Engine
        from serving.offline import predict_file

        engine = Engine.load(settings.bundle_paths(), settings.qos_threshold)
        frame = predict_file(engine, args.requests, args.out)
        counts = frame.decision.value_counts().to_dict()
        print(f"predict: {len(frame)} allocations -> {args.out} (model {engine.version}; {counts})")
        return 0
    import uvicorn

    from serving.app import create_app
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from serving.protocol import bounded_protocol
    app = create_app(settings)
    http = bounded_protocol(int(settings.max_header_kb * 1024), settings.max_headers, settings.read_timeout_s)
    uvicorn.run(app, host=settings.host, port=settings.port, workers=1, log_level="info", access_log=False,
                proxy_headers=False, http=http)
    return 0
