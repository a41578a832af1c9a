"""The QoS monitor's score of a VM (``/v1/qos``): its own first-hour counters through the served LI model. The replay
(``evaluation.qos``) decides with it; this module reads the counters and runs the model."""

from __future__ import annotations

import numpy as np
import pandas as pd

from features.history import own_features
from models.inference import Models
from telemetry.io import counters_source
from telemetry.storage import Location


def monitor_scores(models: Models, vms: pd.DataFrame, raw_dir: Location) -> np.ndarray:
    """P(exceed the PDM) per VM from its own first-hour counters, by the served LI model (``/v1/qos``'s score);
    NaN for a VM without counters."""
    own = own_features(vms["vm_id"], counters_source(raw_dir))
    p = np.full(len(vms), np.nan)
    if len(own):
        row = pd.Index(own.index).get_indexer(vms["vm_id"].astype(str).to_numpy())
        p[row >= 0] = 1.0 - models.p_insensitive(own)[row[row >= 0]]
    return p
