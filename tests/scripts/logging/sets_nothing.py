"""A legacy script that sets no verbosity: absl's app.run leaves logging at INFO."""
from absl import app

import log_body

log_body.log_lines("import")


def main(_):
    log_body.log_lines("main")
    log_body.print_state()


if __name__ == "__main__":
    app.run(main)
