"""`python -m tpu_estimator_compat.scan PATH...` (see `cli.py`)."""

import sys

from tpu_estimator_compat.scan import cli

sys.exit(cli.main())
