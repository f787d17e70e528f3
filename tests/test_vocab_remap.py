"""Tests for tpu_estimator_compat.checkpoint.vocab_remap and warm start's var_name_to_vocab_info.

The reference is TensorFlow's own TF1 warm start (`tf.compat.v1.train.warm_start` run in a
graph and session), which legacy's `WarmStartSettings` called.
"""
import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import EstimatorSpec, RunConfig
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.checkpoint import vocab_remap
from tpu_estimator_compat.checkpoint import warm_start as warm_start_lib

v1 = tf.compat.v1


def _vocab(tmp_path, name, words):
    path = tmp_path / name
    path.write_text("\n".join(words))
    return str(path)


def _old_checkpoint(tmp_path):
    """`emb`: one row per old word (doctor, lawyer, consultant) + 1 OOV row; `logits`: one
    column per old class (a, b, c); `bias`."""
    values = {"emb": np.arange(8, dtype=np.float32).reshape(4, 2) + 1.0,
              "logits": np.arange(6, dtype=np.float32).reshape(2, 3) + 10.0,
              "bias": np.array([7.0], np.float32)}
    path = str(tmp_path / "old" / "model.ckpt")
    with tf.Graph().as_default(), v1.Session() as sess:
        variables = [v1.get_variable(k, initializer=v) for k, v in values.items()]
        sess.run(v1.global_variables_initializer())
        v1.train.Saver(variables).save(sess, path)
    return path


def _infos(tmp_path):
    old_words = _vocab(tmp_path, "old_words", ["doctor", "lawyer", "consultant"])
    new_words = _vocab(tmp_path, "new_words", ["doctor", "consultant", "engineer"])
    old_classes = _vocab(tmp_path, "old_classes", ["a", "b", "c"])
    new_classes = _vocab(tmp_path, "new_classes", ["c", "x", "a"])
    backup = v1.initializers.random_uniform(minval=0.39, maxval=0.39)
    return {
        "emb": v1.train.VocabInfo(new_words, 3, 2, old_words, old_vocab_size=3,
                                  backup_initializer=backup),
        "logits": v1.train.VocabInfo(new_classes, 3, 1, old_classes, axis=1),
    }


def _tf1_warm_start(path, infos, shapes):
    """What TF1's warm start gives each variable (legacy's WarmStartSettings)."""
    with tf.Graph().as_default(), v1.Session() as sess:
        variables = {k: v1.get_variable(k, shape, initializer=v1.zeros_initializer())
                     for k, shape in shapes.items()}
        v1.train.warm_start(path, vars_to_warm_start=None, var_name_to_vocab_info=infos)
        sess.run(v1.global_variables_initializer())
        return {k: sess.run(v) for k, v in variables.items()}


def test_remapped_rows_and_columns_are_tf1_warm_starts(tmp_path):
    path = _old_checkpoint(tmp_path)
    infos = _infos(tmp_path)
    shapes = {"emb": [5, 2], "logits": [2, 4]}
    expected = _tf1_warm_start(path, infos, shapes)
    for name, shape in shapes.items():
        value = vocab_remap.remapped_value(path, name, shape, infos[name], name).numpy()
        np.testing.assert_allclose(value, expected[name])
    # doctor keeps row 0, consultant moves from row 2 to 1, engineer and the OOV rows take
    # the backup initializer; class c moves to column 0, x and the OOV column are zeros.
    np.testing.assert_allclose(expected["emb"], [[1, 2], [5, 6], [.39, .39], [.39, .39],
                                                 [.39, .39]], rtol=1e-6)
    np.testing.assert_allclose(expected["logits"], [[12, 0, 10, 0], [15, 0, 13, 0]])


def test_warm_start_with_vocab_only_leaves_other_variables(tmp_path):
    path = _old_checkpoint(tmp_path)
    infos = _infos(tmp_path)
    variables = {"emb": tf.Variable(tf.zeros([5, 2])), "bias": tf.Variable([0.0])}
    settings = warm_start_lib.WarmStartSettings(
        str(tmp_path / "old"), vars_to_warm_start=None,
        var_name_to_vocab_info={"emb": infos["emb"]})
    assert warm_start_lib.warm_start(settings, variables, {"emb", "bias"}) == 1
    np.testing.assert_allclose(variables["emb"].numpy()[1], [5, 6])
    assert variables["bias"].numpy().tolist() == [0.0]
    # A regex selection warm-starts the others as before, the vocabulary one remapped.
    settings = warm_start_lib.WarmStartSettings(str(tmp_path / "old"),
                                                var_name_to_vocab_info={"emb": infos["emb"]})
    assert warm_start_lib.warm_start(settings, variables, {"emb", "bias"}) == 2
    assert variables["bias"].numpy().tolist() == [7.0]


def test_vocab_info_for_no_selected_variable_raises_as_legacy(tmp_path):
    _old_checkpoint(tmp_path)
    settings = warm_start_lib.WarmStartSettings(
        str(tmp_path / "old"), vars_to_warm_start=None,
        var_name_to_vocab_info={"embedding": _infos(tmp_path)["emb"]})
    with pytest.raises(ValueError, match="var_name_to_vocab_info that were not used"):
        warm_start_lib.warm_start(settings, {"emb": tf.Variable(tf.zeros([5, 2]))}, {"emb"})


def _embedding_model_fn(features, labels, mode):
    emb = v1.get_variable("emb", [5, 2], initializer=v1.zeros_initializer())
    # input_fn's Python lists reach model_fn as lists, as in legacy: TF ops convert them.
    loss = (tf.reduce_sum(tf.nn.embedding_lookup(emb, features["id"]))
            + 0.0 * tf.reduce_sum(labels))
    train_op = v1.train.GradientDescentOptimizer(0.0).minimize(
        tf.reduce_sum(loss), v1.train.get_global_step())
    return EstimatorSpec(mode, loss=tf.reduce_sum(loss), train_op=train_op)


def test_estimator_warm_starts_with_vocabulary_remapping(tmp_path):
    _old_checkpoint(tmp_path)
    settings = warm_start_lib.WarmStartSettings(
        str(tmp_path / "old"), vars_to_warm_start=None,
        var_name_to_vocab_info={"emb": _infos(tmp_path)["emb"]})
    est = Estimator(_embedding_model_fn, config=RunConfig(model_dir=str(tmp_path / "new")),
                    warm_start_from=settings)
    est.train(lambda: ({"id": [[0], [1]]}, [[0.0], [0.0]]), steps=1)
    np.testing.assert_allclose(est.get_variable_value("emb"),
                               [[1, 2], [5, 6]] + [[.39, .39]] * 3, rtol=1e-6)
