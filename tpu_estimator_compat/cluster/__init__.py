"""Where the job runs: TF_CONFIG, workers and their strategy, preemption."""
