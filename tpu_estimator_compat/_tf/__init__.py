"""The one seam with TensorFlow's internals: private reads, patches and the patch table."""
