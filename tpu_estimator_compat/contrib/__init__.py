"""Stand-ins for legacy names whose TensorFlow homes are gone (tf.contrib.*, tf-slim, hub)."""
