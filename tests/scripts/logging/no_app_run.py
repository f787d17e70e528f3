"""A script without absl's app.run that asks TensorFlow for INFO (notebook style)."""
import tensorflow.compat.v1 as tf

import log_body

tf.logging.set_verbosity(tf.logging.INFO)
log_body.log_lines("main", use_absl=False)
log_body.print_state()
