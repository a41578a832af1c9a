"""The QoS monitor's score of a VM (``/v1/qos``): its own first-hour counters through the served LI model. The replay
(``evaluation.qos``) decides with it; this module reads the counters and runs the model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from features.history import own_features
from models.inference import Models
from telemetry.io import counters_source
from telemetry.storage import Location


def own_rows(vms: pd.DataFrame, raw_dir: Location) -> pd.DataFrame:
    """Each VM's own first-hour counters as LI features, one row per row of ``vms`` (NaN: no counters)."""
    own = own_features(vms["vm_id"], counters_source(raw_dir))
    return own.reindex(vms["vm_id"].astype(str).to_numpy()).reset_index(drop=True)


def monitor_scores(models: Models, vms: pd.DataFrame, raw_dir: Location, own: pd.DataFrame | None = None
                   ) -> np.ndarray:
    """P(exceed the PDM) per VM from its own first-hour counters, by the served LI model (``/v1/qos``'s score);
    NaN for a VM without counters. ``own``: ``own_rows`` of ``vms``, where the caller has them."""
    return 1.0 - models.p_insensitive(own_rows(vms, raw_dir) if own is None else own)
