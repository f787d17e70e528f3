# A tiny deterministic "text" classification task made from the embedded digits.
"""Sentence-pair classification data for the tiny BERT, with BERT's feature pipeline.

The language. Each of scikit-learn's 1,797 real 8x8 handwritten digits (shipped inside the
package: no download) becomes one sentence pair. Pixels (0-16) are quantized to 3 levels;
every half-row of 4 pixels is one *word* (3**4 = 81 words, id = base-3 number). The top four
rows (8 words, left half then right half, row by row) are sentence A, the bottom four rows
sentence B, and the label is the digit (10 classes). Sentence B drops its trailing blank
words ("silence"), so sequences have different lengths and `input_mask` matters:

  [CLS] a1 .. a8 [SEP] b1 .. bk [SEP] [PAD] ...   (k <= 8, max_seq_length 24)

Vocabulary: 0 [PAD], 1 [CLS], 2 [SEP], 3 [MASK], then the 81 words (vocab_size 85). The
split is fixed: the first 1,500 digits train, the last 297 test. A position-aware linear
model reaches about 0.90 test accuracy on these tokens, which bounds what to expect.

The pipeline is BERT's: examples -> `InputFeatures` (input_ids, input_mask, segment_ids,
label_id, is_real_example) -> a TFRecord file -> `file_based_input_fn_builder`, whose
input_fn decodes records with `tf.parse_single_example` and batches `params['batch_size']`.
For TPU evaluation the example list is padded with `PaddingInputExample`s (is_real_example
= 0) to a multiple of the batch size, and the metrics weight them out.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import collections

import numpy as np
import tensorflow.compat.v1 as tf

PAD, CLS, SEP, MASK = 0, 1, 2, 3
NUM_SPECIAL = 4
LEVELS = 3
WORDS_PER_ROW = 2
NUM_WORDS = LEVELS ** (8 // WORDS_PER_ROW)
VOCAB_SIZE = NUM_SPECIAL + NUM_WORDS
BLANK = NUM_SPECIAL  # The word for four empty pixels.
NUM_LABELS = 10
MAX_SEQ_LENGTH = 24
NUM_TRAIN = 1500


class InputExample(object):
    """One sentence pair: word ids of sentence A and B, and the integer label."""

    def __init__(self, guid, tokens_a, tokens_b, label):
        self.guid = guid
        self.tokens_a = tokens_a
        self.tokens_b = tokens_b
        self.label = label


class PaddingInputExample(object):
    """A fake example that pads the eval set to a whole number of TPU batches."""


class InputFeatures(object):
    """The model inputs of one example."""

    def __init__(self, input_ids, input_mask, segment_ids, label_id, is_real_example=True):
        self.input_ids = input_ids
        self.input_mask = input_mask
        self.segment_ids = segment_ids
        self.label_id = label_id
        self.is_real_example = is_real_example


def digits_to_words(images):
    """[N, 8, 8] pixel values 0-16 -> [N, 16] word ids (NUM_SPECIAL .. VOCAB_SIZE-1)."""
    levels = np.minimum((np.asarray(images) * LEVELS / 17.0).astype(np.int64), LEVELS - 1)
    half_rows = levels.reshape(len(levels), 8 * WORDS_PER_ROW, 8 // WORDS_PER_ROW)
    place_values = LEVELS ** np.arange(half_rows.shape[-1] - 1, -1, -1)
    return NUM_SPECIAL + (half_rows * place_values).sum(-1)


def get_examples(split):
    """Returns the InputExamples of 'train' (1,500) or 'test' (297)."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    words = digits_to_words(digits.images)
    if split == "train":
        indices = range(NUM_TRAIN)
    elif split == "test":
        indices = range(NUM_TRAIN, len(words))
    else:
        raise ValueError("split must be 'train' or 'test', got %r" % (split,))
    examples = []
    for i in indices:
        tokens_a = [int(w) for w in words[i, :8]]
        tokens_b = [int(w) for w in words[i, 8:]]
        while tokens_b and tokens_b[-1] == BLANK:
            tokens_b.pop()
        examples.append(InputExample("%s-%d" % (split, i), tokens_a, tokens_b,
                                     int(digits.target[i])))
    return examples


def convert_single_example(example, max_seq_length=MAX_SEQ_LENGTH):
    """[CLS] A [SEP] B [SEP], segment ids 0/1, zero-padded to max_seq_length."""
    if isinstance(example, PaddingInputExample):
        return InputFeatures([0] * max_seq_length, [0] * max_seq_length,
                             [0] * max_seq_length, 0, is_real_example=False)
    input_ids = [CLS] + example.tokens_a + [SEP] + example.tokens_b + [SEP]
    segment_ids = [0] * (len(example.tokens_a) + 2) + [1] * (len(example.tokens_b) + 1)
    if len(input_ids) > max_seq_length:
        raise ValueError("Example %s has %d tokens > max_seq_length %d"
                         % (example.guid, len(input_ids), max_seq_length))
    input_mask = [1] * len(input_ids)
    padding = max_seq_length - len(input_ids)
    return InputFeatures(input_ids + [PAD] * padding, input_mask + [0] * padding,
                         segment_ids + [0] * padding, example.label)


def pad_for_tpu(examples, batch_size):
    """Appends PaddingInputExamples until len(examples) is a multiple of batch_size."""
    examples = list(examples)
    while len(examples) % batch_size:
        examples.append(PaddingInputExample())
    return examples


def file_based_convert_examples_to_features(examples, output_file,
                                            max_seq_length=MAX_SEQ_LENGTH):
    """Writes the examples' features as tf.train.Examples to a TFRecord file."""
    def int_feature(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    with tf.io.TFRecordWriter(output_file) as writer:
        for example in examples:
            feature = convert_single_example(example, max_seq_length)
            features = collections.OrderedDict([
                ("input_ids", int_feature(feature.input_ids)),
                ("input_mask", int_feature(feature.input_mask)),
                ("segment_ids", int_feature(feature.segment_ids)),
                ("label_ids", int_feature([feature.label_id])),
                ("is_real_example", int_feature([int(feature.is_real_example)])),
            ])
            record = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(record.SerializeToString())


def file_based_input_fn_builder(input_file, seq_length, is_training, drop_remainder,
                                with_labels=True):
    """Returns an input_fn(params) over a TFRecord file written by the function above.

    The dataset yields (features, label_ids): features is a dict of int32 [B, seq_length]
    `input_ids`, `input_mask`, `segment_ids` and [B] `is_real_example`; with
    `with_labels=False` (predict) it yields the features dict alone.
    """
    name_to_features = {
        "input_ids": tf.FixedLenFeature([seq_length], tf.int64),
        "input_mask": tf.FixedLenFeature([seq_length], tf.int64),
        "segment_ids": tf.FixedLenFeature([seq_length], tf.int64),
        "label_ids": tf.FixedLenFeature([], tf.int64),
        "is_real_example": tf.FixedLenFeature([], tf.int64),
    }

    def decode_record(record):
        example = tf.parse_single_example(record, name_to_features)
        # tf.Example only stores int64; TPUs want int32.
        example = {name: tf.to_int32(value) for name, value in example.items()}
        label_ids = example.pop("label_ids")
        return (example, label_ids) if with_labels else example

    def input_fn(params):
        batch_size = params["batch_size"]
        d = tf.data.TFRecordDataset(input_file)
        if is_training:
            d = d.repeat()
            d = d.shuffle(buffer_size=100, seed=12345)
        d = d.map(decode_record)
        return d.batch(batch_size, drop_remainder=drop_remainder)

    return input_fn


def mlm_arrays(examples, max_seq_length=MAX_SEQ_LENGTH, mask_prob=0.15, seed=0):
    """Masked-LM arrays for the "pretraining" run, from unlabeled sentence pairs.

    Returns a dict of int32 numpy arrays: input_ids (with ~mask_prob of the words replaced
    by [MASK]), input_mask, segment_ids, and masked_lm_labels (the original word where
    masked, -1 elsewhere). Deterministic for a given seed.
    """
    rng = np.random.RandomState(seed)
    features = [convert_single_example(e, max_seq_length) for e in examples]
    input_ids = np.array([f.input_ids for f in features], np.int32)
    is_word = input_ids >= NUM_SPECIAL
    masked = is_word & (rng.uniform(size=input_ids.shape) < mask_prob)
    return {
        "input_ids": np.where(masked, MASK, input_ids).astype(np.int32),
        "input_mask": np.array([f.input_mask for f in features], np.int32),
        "segment_ids": np.array([f.segment_ids for f in features], np.int32),
        "masked_lm_labels": np.where(masked, input_ids, -1).astype(np.int32),
    }
