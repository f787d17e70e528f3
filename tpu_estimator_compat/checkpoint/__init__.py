"""Checkpoints in model_dir: naming, saving policy, warm start, safety of the directory."""
