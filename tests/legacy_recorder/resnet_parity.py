"""The ResNet recipe's entry points: legacy_models/resnet's model and input, without its flags.

resnet_tpu.py defines absl flags (`--tpu`, ...) that mnist_tpu.py defines too, so the two
scripts cannot be imported into one process; the recipe points here instead. Nothing is
changed: these are the script's own model_fn and DigitsInput input_fns.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "legacy_models", "resnet"))

import digits_input  # noqa: E402
import resnet_model  # noqa: E402

model_fn = resnet_model.model_fn
train_input_fn = digits_input.DigitsInput(is_training=True, split="train").input_fn
eval_input_fn = digits_input.DigitsInput(is_training=False, split="test").input_fn
predict_input_fn = digits_input.DigitsInput(
    is_training=False, split="test", with_labels=False, num_examples=16).input_fn
