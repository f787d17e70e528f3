"""tf.logging.set_verbosity at import time, before app.run; the level is the first argument."""
import sys

import tensorflow.compat.v1 as tf
from absl import app

import log_body

tf.logging.set_verbosity(getattr(tf.logging, sys.argv.pop(1)))
log_body.log_lines("import")


def main(_):
    log_body.log_lines("main")
    log_body.print_state()


if __name__ == "__main__":
    app.run(main)
