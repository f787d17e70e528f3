"""A trainer for the fault tests: trains a tiny model, checkpointing every step.

Usage: train_forever.py MODEL_DIR MAX_STEPS [SAVE_CHECKPOINTS_STEPS]. Every batch is the same 64 digits, so any run
that resumes from a checkpoint ends with the weights of an uninterrupted run.
"""

import os
import sys

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import models  # noqa: E402
import tpu_estimator_compat as tec  # noqa: E402


def main(model_dir: str, max_steps: int, save_steps: int = 1) -> None:
    config = tec.RunConfig(model_dir=model_dir, save_checkpoints_steps=save_steps,
                           keep_checkpoint_max=3,
                           tpu_config=tec.TPUConfig(iterations_per_loop=1))
    est = tec.TPUEstimator(model_fn=models.linear_model_fn, config=config, use_tpu=False,
                           train_batch_size=64)
    print("READY", flush=True)
    est.train(models.digits_input_fn(64, flat=True), max_steps=max_steps)
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:]))
