"""Throughput benchmark: the shim vs a hand-written TF2 loop, tf_keras fit and legacy TPUEstimator.

    .venv/bin/python -m bench            # full run, writes bench/RESULTS.md
    .venv/bin/python -m bench --quick    # < 3 min, for development

Importing this package must stay free of TensorFlow: the legacy contender imports
`bench.models_v1` and `bench.common` under TF 2.15 in `.venv-legacy`.
"""
