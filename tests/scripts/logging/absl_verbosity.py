"""absl's verbosity set at import (WARNING), then TensorFlow's logger opened in main."""
import tensorflow.compat.v1 as tf
from absl import app
from absl import logging as absl_logging

import log_body

absl_logging.set_verbosity(absl_logging.WARNING)


def main(_):
    log_body.log_lines("main, before tf.logging.set_verbosity")
    tf.logging.set_verbosity(tf.logging.INFO)
    log_body.log_lines("main")
    log_body.print_state()


if __name__ == "__main__":
    app.run(main)
