"""tf.logging.set_verbosity(INFO) in main, after app.run parsed the flags."""
import tensorflow.compat.v1 as tf
from absl import app

import log_body


def main(_):
    tf.logging.set_verbosity(tf.logging.INFO)
    log_body.log_lines("main")
    log_body.print_state()


if __name__ == "__main__":
    app.run(main)
