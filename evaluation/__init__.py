"""Evaluation: the next day judged and the nights replayed through the DRAM simulator (``pond.simulator``), the
fleet calibrated against published figures, and what a telemetry folder can feed."""
