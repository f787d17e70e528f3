"""The estimator facade and train_and_evaluate."""
