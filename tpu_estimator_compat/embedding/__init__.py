"""TPU embedding tables on GPUs and CPU replicas."""
