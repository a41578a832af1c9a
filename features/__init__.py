"""Features: TMA metrics from raw events, customer untouched percentiles, workload history, snapshot."""
