"""SavedModel export: the serving graph and its receivers and outputs."""
