"""One replica step: calling model_fn, cross-shard ops, optimizer updates, metrics."""
