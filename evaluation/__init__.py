"""Evaluation: calibration of the fleet against published figures, trade-off curves and savings."""
