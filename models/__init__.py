"""Models: the latency-insensitivity classifier and the untouched-memory quantile regressor."""
