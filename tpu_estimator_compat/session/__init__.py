"""One train/evaluate/predict run over a strategy's live state."""
