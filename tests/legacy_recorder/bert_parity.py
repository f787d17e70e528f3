"""The BERT recipe's entry points: legacy_models/bert's classifier, fine-tuned from scratch.

What bert_classifier_tpu.py builds, minus its flags and its pretraining stage (which would
double the recorded run): `classifier_model.model_fn_builder` on the tiny encoder config,
`digits_text` examples written to TFRecords (in a temporary directory, at import, on either
stack) and read back by `file_based_input_fn_builder`. `use_tpu` is taken from params at call
time, so the legacy CPU run gets the plain AdamWeightDecay optimizer and the shim's N-replica
run the CrossShardOptimizer path, as the script would with --use_tpu.
"""

import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "legacy_models", "bert"))

import classifier_model  # noqa: E402
import digits_text  # noqa: E402
import pretrain  # noqa: E402

TRAIN_STEPS = 30
LEARNING_RATE = 2e-3

_DATA_DIR = tempfile.mkdtemp(prefix="bert_parity_")
atexit.register(shutil.rmtree, _DATA_DIR, ignore_errors=True)
_FILES = {}
for _split in ("train", "test"):
    _FILES[_split] = os.path.join(_DATA_DIR, f"{_split}.tf_record")
    digits_text.file_based_convert_examples_to_features(
        digits_text.get_examples(_split), _FILES[_split])

_MODEL_FNS = {
    use_tpu: classifier_model.model_fn_builder(
        bert_config=pretrain.tiny_bert_config(), num_labels=digits_text.NUM_LABELS,
        init_checkpoint=None, learning_rate=LEARNING_RATE, num_train_steps=TRAIN_STEPS,
        num_warmup_steps=3, use_tpu=use_tpu, use_one_hot_embeddings=False)
    for use_tpu in (False, True)
}


def model_fn(features, labels, mode, params):
    return _MODEL_FNS[bool(params["use_tpu"])](features, labels, mode, params)


train_input_fn = digits_text.file_based_input_fn_builder(
    _FILES["train"], digits_text.MAX_SEQ_LENGTH, is_training=True, drop_remainder=True)
eval_input_fn = digits_text.file_based_input_fn_builder(
    _FILES["test"], digits_text.MAX_SEQ_LENGTH, is_training=False, drop_remainder=False)
predict_input_fn = digits_text.file_based_input_fn_builder(
    _FILES["test"], digits_text.MAX_SEQ_LENGTH, is_training=False, drop_remainder=False,
    with_labels=False)
