"""Evaluation: the next day judged and the nights replayed, the fleet calibrated against published figures, what a
telemetry folder can feed, and the DRAM simulator (sizing, packing, pool_fit, pool_sim, trace) that prices pooling."""
