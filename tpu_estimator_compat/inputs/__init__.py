"""Legacy input_fn to per-replica input."""
