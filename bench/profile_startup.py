"""Where the shim's time to first step goes: a cProfile of a fresh 1-step `train()`.

`python -m bench.profile_startup [WORKLOAD] [REPLICAS]` (from the repository root; defaults
resnet 8) builds the bench's v1 model_fn on REPLICAS logical CPUs (`use_tpu=True` on
several, as `run_shim.py` runs it), on the CPU allocator the launcher picks for it, and prints
the time to first step and the top of a cProfile of it by cumulative time: `loop.trace`
(model_fn traced once per replica thread), the first `TFE_Py_Execute` (TensorFlow optimising
the function graph, then one step) and the checkpoint. A development probe, not a contender.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv: list[str]) -> None:
    for name, value in (("TF_ENABLE_ONEDNN_OPTS", "0"), ("TF_USE_LEGACY_KERAS", "1"),
                        ("TF_CPP_MIN_LOG_LEVEL", "2")):
        os.environ.setdefault(name, value)
    workload = argv[1] if len(argv) > 1 else "resnet"
    replicas = int(argv[2]) if len(argv) > 2 else 8
    from tpu_estimator_compat import run  # pylint: disable=import-outside-toplevel

    run.cpu_allocator(None, replicas)
    from bench import data, devices, models_v1

    devices.split_cpu(replicas)
    import tpu_estimator_compat as shim

    tmp = tempfile.mkdtemp()
    npz = os.path.join(tmp, "digits.npz")
    data.generate(npz, REPO)
    batch = models_v1.WORKLOADS[workload].batch_size
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    estimator = shim.TPUEstimator(
        model_fn=models_v1.make_model_fn(workload, shim.TPUEstimatorSpec),
        config=shim.RunConfig(model_dir=os.path.join(tmp, "model"), tf_random_seed=1,
                              tpu_config=shim.TPUConfig(10, replicas)),
        params={"data": npz, "workload": workload}, use_tpu=replicas > 1,
        train_batch_size=batch)
    estimator.train(models_v1.train_input_fn, steps=1)
    profile.disable()
    print(f"{workload} on {replicas} replica(s): time to first step "
          f"{time.perf_counter() - start:.2f} s (under cProfile)")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(40)


if __name__ == "__main__":
    main(sys.argv)
