"""What each logging case script logs, and the logging state it ends in (a `STATE` line).

The case scripts are legacy scripts as their users wrote them; the recorder runs them with
`python SCRIPT.py` on the legacy stack and tests/test_logging.py through the launcher.
"""
import logging
import sys

import tensorflow.compat.v1 as tf
from absl import flags
from absl import logging as absl_logging


def log_lines(tag, use_absl=True):
    """One line per channel and level: TensorFlow's logger, absl's, a third-party logger."""
    tf.logging.debug("tf debug %s", tag)
    tf.logging.info("tf info %s", tag)
    tf.logging.warning("tf warning %s", tag)
    if use_absl:  # absl's functions configure a bare root logger themselves.
        absl_logging.debug("absl debug %s", tag)
        absl_logging.info("absl info %s", tag)
        absl_logging.warning("absl warning %s", tag)
    logging.getLogger("thirdparty").info("thirdparty info %s", tag)
    logging.getLogger("thirdparty").warning("thirdparty warning %s", tag)


def _handlers(logger):
    return [f"{type(h).__name__}({getattr(getattr(h, 'stream', None), 'name', '')})"
            for h in logger.handlers]


def print_state():
    """The levels and handlers of the root, `tensorflow` and `absl` loggers, and absl's flag."""
    root, tf_logger = logging.getLogger(), tf.get_logger()
    verbosity = flags.FLAGS["verbosity"]
    print(f"STATE root={root.level} root_handlers={_handlers(root)} tf={tf_logger.level} "
          f"tf_handlers={_handlers(tf_logger)} tf_propagate={tf_logger.propagate} "
          f"absl={absl_logging.get_absl_logger().level} verbosity={verbosity.value} "
          f"verbosity_default={verbosity.using_default_value}")
    sys.stdout.flush()
