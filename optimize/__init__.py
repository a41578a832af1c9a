"""Optimize: the solver that picks the LI threshold and UM target under the PDM/TP budget."""
