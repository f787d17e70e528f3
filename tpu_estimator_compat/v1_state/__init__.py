"""TF1 variable semantics inside replica steps: v1 variables, stores, names, Keras 2."""
