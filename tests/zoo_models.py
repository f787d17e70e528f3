# A zoo of small r1 TPUEstimator model_fns, written the way TF1/TPU users wrote them.
"""Fourteen small r1-style model_fns covering idioms that tests/models.py and legacy_models/ do not.

Each model is what a TF1 user would have written for `tf.compat.v1.estimator.tpu.TPUEstimator`:
it imports only tensorflow, numpy and scikit-learn, reaches `TPUEstimatorSpec` through
`tf.compat.v1.estimator.tpu`, and reads `params['use_tpu']` and `params['batch_size']`. The
same file therefore runs unchanged on the legacy stack (TF 2.15 + tensorflow-estimator, for the
parity recipes at the bottom) and on tpu_estimator_compat after `install_aliases()`.

- `rnn_model_fn`: LSTMCell, or MultiRNNCell of GRUCells, in dynamic_rnn (a while loop in the
  replica step); Adam.
- `clipped_model_fn`: compute_gradients -> clip_by_global_norm -> apply_gradients inside
  CrossShardOptimizer; Nesterov momentum; polynomial_decay.
- `ema_model_fn`: ExponentialMovingAverage(num_updates=global_step).apply in the train_op.
- `optimizer_model_fn`: Adagrad, centered RMSProp, Adam, Adadelta, FTRL (l1, l2) over
  get_variable weights; piecewise_constant.
- `unfused_bn_model_fn`: conv + batch_normalization(fused=False) + UPDATE_OPS.
- `siamese_model_fn`: dict features, one tower shared through variable_scope(AUTO_REUSE);
  auc/precision/recall from a dict of eval_metrics tensors.
- `embedding_model_fn`: dict features, get_variable tables + embedding_lookup, a reshape by
  params['batch_size'].
- `regression_model_fn`: float labels, mean_squared_error, rmse/mae; multi-head PREDICT with
  export_outputs (RegressionOutput + PredictOutput).
- `counter_model_fn`: non-trainable counters via assign/assign_add in the train_op; a
  Scaffold without init_fn; optionally a host_call writing v1 histogram/image summaries.
- `autoencoder_model_fn`: signature (features, mode, params, config), input_fn without
  labels, bare-tensor predictions (use_tpu=False).
- `segmenter_model_fn`: per-pixel labels, mean_iou + mean_per_class_accuracy.
- `no_params_model_fn`: signature (features, labels, mode), which TPUEstimator refuses.
- `gan_model_fn`: two optimizers in one train_op, var_lists filtered by scope, noise sized
  by params['batch_size'].
- `label_sum_model_fn` + `iterator_input_fn`: input_fn returning
  make_one_shot_iterator(dataset).get_next().
"""

import functools

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1

NUM_TRAIN = 1200
TRAIN, EVAL, PREDICT = "train", "eval", "infer"


def _spec(*args, **kwargs):
    return v1.estimator.tpu.TPUEstimatorSpec(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def all_digits():
    """All 1,797 digits ([n, 8, 8] float32 in [0, 1], [n] int32), shared by models.py too.

    Read once per process (load_digits parses a CSV: ~30 ms for each input_fn call
    otherwise); read-only, so no caller can change another's data.
    """
    from sklearn.datasets import load_digits

    data = load_digits()
    images, labels = (data.images / 16.0).astype(np.float32), data.target.astype(np.int32)
    images.flags.writeable = labels.flags.writeable = False
    return images, labels


def digits(split, n=None):
    """([n, 8, 8] float32 in [0, 1], [n] int32) from scikit-learn's real digits."""
    images, labels = all_digits()
    if split == "train":
        images, labels = images[:NUM_TRAIN], labels[:NUM_TRAIN]
    else:
        images, labels = images[NUM_TRAIN:], labels[NUM_TRAIN:]
    if n is not None:
        images, labels = images[:n], labels[:n]
    return images, labels


def _optimizer(opt, params):
    if params["use_tpu"]:
        opt = v1.tpu.CrossShardOptimizer(opt)
    return opt


def _classifier_metric_fn(labels, logits):
    predictions = tf.argmax(logits, axis=1)
    return {"accuracy": v1.metrics.accuracy(labels=labels, predictions=predictions)}


def _classifier_spec(mode, logits, labels, params, make_optimizer, extra_loss=None):
    """The PREDICT / EVAL / TRAIN tail most classifiers shared."""
    if mode == PREDICT:
        return _spec(mode, predictions={"class_ids": tf.argmax(logits, axis=1),
                                        "probabilities": tf.nn.softmax(logits)})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if extra_loss is not None:
        loss += extra_loss
    if mode == EVAL:
        return _spec(mode, loss=loss, eval_metrics=(_classifier_metric_fn, [labels, logits]))
    step = v1.train.get_global_step()
    opt = _optimizer(make_optimizer(step), params)
    return _spec(mode, loss=loss, train_op=opt.minimize(loss, global_step=step))


# --------------------------------------------------------------------------------------
# Input functions.


def image_input_fn(split, n=None, repeat=None, labels=True, flat=False, channels=False):
    """An input_fn over the digits: (images, labels) or images only; train repeats."""
    def input_fn(params):
        images, targets = digits(split, n)
        if flat:
            images = images.reshape(len(images), -1)
        elif channels:
            images = images[..., None]
        ds = tf.data.Dataset.from_tensor_slices((images, targets) if labels else images)
        if repeat if repeat is not None else split == "train":
            ds = ds.shuffle(256, seed=3).repeat()
        return ds.batch(params["batch_size"], drop_remainder=split == "train")
    return input_fn


# --------------------------------------------------------------------------------------
# 1. Recurrent: each image row is a time step.


def rnn_model_fn(features, labels, mode, params):
    units = params.get("units", 16)
    if params.get("cell", "lstm") == "lstm":
        cell = v1.nn.rnn_cell.LSTMCell(units)
    else:
        cell = v1.nn.rnn_cell.MultiRNNCell([v1.nn.rnn_cell.GRUCell(units) for _ in range(2)])
    outputs, _ = v1.nn.dynamic_rnn(cell, features, dtype=tf.float32)
    logits = v1.layers.dense(outputs[:, -1, :], 10)
    return _classifier_spec(mode, logits, labels, params,
                            lambda step: v1.train.AdamOptimizer(params.get("learning_rate", 0.01)))


# --------------------------------------------------------------------------------------
# 2. Gradient clipping inside CrossShardOptimizer.


def _mlp(x, hidden=32):
    x = v1.layers.dense(x, hidden, activation=tf.nn.relu)
    return v1.layers.dense(x, 10)


def clipped_model_fn(features, labels, mode, params):
    logits = _mlp(features)
    if mode != TRAIN:
        return _classifier_spec(mode, logits, labels, params, None)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    step = v1.train.get_global_step()
    lr = v1.train.polynomial_decay(params.get("learning_rate", 0.1), step, 100,
                                   end_learning_rate=0.01, power=2.0)
    opt = _optimizer(v1.train.MomentumOptimizer(lr, 0.9, use_nesterov=True), params)
    grads_and_vars = opt.compute_gradients(loss)
    grads, tvars = zip(*grads_and_vars)
    clipped, _ = tf.clip_by_global_norm(grads, params.get("clip_norm", 0.25))
    train_op = opt.apply_gradients(zip(clipped, tvars), global_step=step)
    return _spec(mode, loss=loss, train_op=train_op)


# --------------------------------------------------------------------------------------
# 3. Exponential moving average of the weights.


def ema_model_fn(features, labels, mode, params):
    logits = _mlp(features)
    if mode != TRAIN:
        return _classifier_spec(mode, logits, labels, params, None)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    step = v1.train.get_global_step()
    opt = _optimizer(v1.train.GradientDescentOptimizer(params.get("learning_rate", 0.2)), params)
    opt_op = opt.minimize(loss, global_step=step)
    ema = v1.train.ExponentialMovingAverage(decay=0.9, num_updates=step)
    with tf.control_dependencies([opt_op]):
        train_op = ema.apply(v1.trainable_variables())
    return _spec(mode, loss=loss, train_op=train_op)


# --------------------------------------------------------------------------------------
# 4. The v1 optimizer zoo, with a piecewise-constant schedule.

OPTIMIZERS = {
    "adagrad": lambda lr: v1.train.AdagradOptimizer(lr, initial_accumulator_value=0.1),
    "rmsprop": lambda lr: v1.train.RMSPropOptimizer(lr * 0.1, decay=0.9, momentum=0.9,
                                                    centered=True),
    "adam": lambda lr: v1.train.AdamOptimizer(lr * 0.1, beta1=0.8, epsilon=1e-6),
    "adadelta": lambda lr: v1.train.AdadeltaOptimizer(lr * 10.0),
    "ftrl": lambda lr: v1.train.FtrlOptimizer(lr, l1_regularization_strength=0.001,
                                              l2_regularization_strength=0.001),
}


def optimizer_model_fn(features, labels, mode, params):
    w = v1.get_variable("w", [64, 10], initializer=v1.glorot_uniform_initializer())
    b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(features, w) + b

    def make_optimizer(step):
        lr = v1.train.piecewise_constant(step, [10, 20], [0.1, 0.05, 0.02])
        return OPTIMIZERS[params["optimizer"]](lr)

    return _classifier_spec(mode, logits, labels, params, make_optimizer)


# --------------------------------------------------------------------------------------
# 5. Unfused batch norm.


def unfused_bn_model_fn(features, labels, mode, params):
    training = mode == TRAIN
    x = v1.layers.conv2d(features, 8, 3, padding="same", use_bias=False)
    x = v1.layers.batch_normalization(x, training=training, fused=False, momentum=0.9)
    x = tf.nn.relu(x)
    x = v1.layers.flatten(x)
    logits = v1.layers.dense(x, 10)
    if mode != TRAIN:
        return _classifier_spec(mode, logits, labels, params, None)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    step = v1.train.get_global_step()
    opt = _optimizer(v1.train.MomentumOptimizer(params.get("learning_rate", 0.05), 0.9), params)
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
        train_op = opt.minimize(loss, global_step=step)
    return _spec(mode, loss=loss, train_op=train_op)


# --------------------------------------------------------------------------------------
# 6. Siamese pairs: a shared tower, dict features, binary metrics.


def pair_input_fn(split, n=None, repeat=None):
    """({'left', 'right'} flat digit pairs, 1.0 if the same digit else 0.0)."""
    def input_fn(params):
        images, labels = digits(split, n)
        images = images.reshape(len(images), -1)
        order = np.random.RandomState(7).permutation(len(images))
        # Half the pairs are the same class: pair each example with the next of its class.
        partner = order.copy()
        for i in range(0, len(images), 2):
            same = np.nonzero(labels == labels[i])[0]
            partner[i] = same[(np.searchsorted(same, i) + 1) % len(same)]
        target = (labels == labels[partner]).astype(np.float32)
        ds = tf.data.Dataset.from_tensor_slices(
            ({"left": images, "right": images[partner]}, target))
        if repeat if repeat is not None else split == "train":
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=split == "train")
    return input_fn


def _tower(x):
    with v1.variable_scope("tower", reuse=v1.AUTO_REUSE):
        x = v1.layers.dense(x, 32, activation=tf.nn.relu, name="fc1")
        scale = v1.get_variable("scale", [], initializer=v1.ones_initializer())
        return v1.layers.dense(x, 16, name="fc2") * scale


def _pair_metric_fn(labels, probabilities):
    predicted = tf.cast(probabilities > 0.5, tf.float32)
    return {
        "auc": v1.metrics.auc(labels, probabilities),
        "precision": v1.metrics.precision(labels, predicted),
        "recall": v1.metrics.recall(labels, predicted),
    }


def siamese_model_fn(features, labels, mode, params):
    left, right = _tower(features["left"]), _tower(features["right"])
    distance = tf.reduce_sum(tf.square(left - right), axis=1)
    bias = v1.get_variable("margin", [], initializer=v1.constant_initializer(1.0))
    logits = bias - distance
    probabilities = tf.sigmoid(logits)
    if mode == PREDICT:
        return _spec(mode, predictions={"same": probabilities, "distance": distance})
    loss = v1.losses.sigmoid_cross_entropy(labels, logits)
    if mode == EVAL:
        return _spec(mode, loss=loss, eval_metrics=(
            _pair_metric_fn, {"labels": labels, "probabilities": probabilities}))
    step = v1.train.get_global_step()
    opt = _optimizer(v1.train.RMSPropOptimizer(params.get("learning_rate", 0.01)), params)
    return _spec(mode, loss=loss, train_op=opt.minimize(loss, global_step=step))


# --------------------------------------------------------------------------------------
# 7. Token ids and embedding tables, reshaped with params['batch_size'].

VOCAB = 17  # Pixel intensities 0..16 as token ids.


def token_input_fn(split, n=None, repeat=None, labels=True):
    """({'ids': [64] int32 pixel intensities, 'row_sums': [8] float32}, label)."""
    def input_fn(params):
        images, targets = digits(split, n)
        ids = np.round(images * 16).astype(np.int32).reshape(len(images), -1)
        features = {"ids": ids, "row_sums": images.sum(axis=2)}
        ds = tf.data.Dataset.from_tensor_slices((features, targets) if labels else features)
        if repeat if repeat is not None else split == "train":
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=split == "train")
    return input_fn


def embedding_model_fn(features, labels, mode, params):
    batch_size = params["batch_size"]
    with v1.variable_scope("embeddings"):
        table = v1.get_variable("tokens", [VOCAB, 4],
                                initializer=v1.truncated_normal_initializer(stddev=0.1))
        positions = v1.get_variable("positions", [64, 4],
                                    initializer=v1.truncated_normal_initializer(stddev=0.1))
    embedded = tf.nn.embedding_lookup(table, features["ids"]) + positions
    flat = tf.reshape(embedded, [batch_size, 64 * 4])
    x = tf.concat([flat, features["row_sums"]], axis=1)
    logits = v1.layers.dense(x, 10, name="logits")
    return _classifier_spec(mode, logits, labels, params,
                            lambda step: v1.train.AdagradOptimizer(0.1))


# --------------------------------------------------------------------------------------
# 8. Regression with several prediction heads and export_outputs.


def regression_input_fn(split, n=None, repeat=None, labels=True):
    """Flat digits -> the digit's value / 9 as a float target."""
    def input_fn(params):
        images, targets = digits(split, n)
        images = images.reshape(len(images), -1)
        values = (targets / 9.0).astype(np.float32)
        ds = tf.data.Dataset.from_tensor_slices((images, values) if labels else images)
        if repeat if repeat is not None else split == "train":
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=split == "train")
    return input_fn


def _regression_metric_fn(labels, predictions):
    return {"rmse": v1.metrics.root_mean_squared_error(labels, predictions),
            "mae": v1.metrics.mean_absolute_error(labels, predictions)}


def regression_model_fn(features, labels, mode, params):
    hidden = v1.layers.dense(features, 16, activation=tf.nn.tanh, name="hidden")
    value = tf.squeeze(v1.layers.dense(hidden, 1, name="value"), axis=1)
    if mode == PREDICT:
        export = v1.estimator.export
        return _spec(mode, predictions={"value": value, "rounded": tf.round(value * 9.0),
                                        "hidden": hidden},
                     export_outputs={
                         "serving_default": export.RegressionOutput(value=value),
                         "hidden": export.PredictOutput({"hidden": hidden})})
    loss = v1.losses.mean_squared_error(labels, value)
    if mode == EVAL:
        return _spec(mode, loss=loss, eval_metrics=(_regression_metric_fn, [labels, value]))
    step = v1.train.get_global_step()
    opt = _optimizer(v1.train.AdadeltaOptimizer(1.0), params)
    return _spec(mode, loss=loss, train_op=opt.minimize(loss, global_step=step))


# --------------------------------------------------------------------------------------
# 9. Counters, host_call with v1 summaries, a Scaffold without init_fn.


def counter_model_fn(features, labels, mode, params):
    logits = _mlp(v1.layers.flatten(features), hidden=16)
    if mode != TRAIN:
        return _classifier_spec(mode, logits, labels, params, None)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    step = v1.train.get_global_step()
    examples = v1.get_variable("counters/examples_seen", [], tf.int64,
                               initializer=v1.zeros_initializer(), trainable=False)
    last_loss = v1.get_variable("counters/last_loss", [], tf.float32,
                                initializer=v1.zeros_initializer(), trainable=False)
    opt = _optimizer(v1.train.GradientDescentOptimizer(0.1), params)
    train_op = tf.group(opt.minimize(loss, global_step=step),
                        v1.assign_add(examples, tf.cast(params["batch_size"], tf.int64)),
                        v1.assign(last_loss, loss))

    def host_call_fn(global_step, logits, images):
        del global_step
        return v1.summary.merge([
            v1.summary.histogram("logits", logits),
            # The digits are [batch, 8, 8]; image summaries need NHWC.
            v1.summary.image("inputs", images[..., None], max_outputs=2)])

    host_call = None
    if params.get("summaries_host_call"):
        host_call = (host_call_fn, [tf.reshape(step, [1]), logits, features])

    def scaffold_fn():
        return v1.train.Scaffold()

    return _spec(mode, loss=loss, train_op=train_op, host_call=host_call,
                 scaffold_fn=scaffold_fn)


# --------------------------------------------------------------------------------------
# 10. No labels: (features, mode, params, config), bare-tensor predictions.


def autoencoder_model_fn(features, mode, params, config):
    del config  # Taken, as many model_fns did, for config.model_dir or num_shards.
    code = v1.layers.dense(features, 8, activation=tf.nn.relu, name="encoder")
    reconstruction = v1.layers.dense(code, 64, activation=tf.nn.sigmoid, name="decoder")
    if mode == PREDICT:
        return _spec(mode, predictions=reconstruction)
    loss = v1.losses.mean_squared_error(features, reconstruction)
    if mode == EVAL:
        def metric_fn(images, reconstructions):
            return {"rmse": v1.metrics.root_mean_squared_error(images, reconstructions)}
        return _spec(mode, loss=loss, eval_metrics=(metric_fn, [features, reconstruction]))
    step = v1.train.get_global_step()
    opt = _optimizer(v1.train.RMSPropOptimizer(0.01, centered=True), params)
    return _spec(mode, loss=loss, train_op=opt.minimize(loss, global_step=step))


# --------------------------------------------------------------------------------------
# 11. Per-pixel segmentation: mean_iou.


def segmentation_input_fn(split, n=None, repeat=None):
    """Digits images -> per-pixel foreground mask (intensity > 0.4)."""
    def input_fn(params):
        images, _ = digits(split, n)
        masks = (images > 0.4).astype(np.int32)
        ds = tf.data.Dataset.from_tensor_slices((images[..., None], masks))
        if repeat if repeat is not None else split == "train":
            ds = ds.repeat()
        return ds.batch(params["batch_size"], drop_remainder=split == "train")
    return input_fn


def _segmentation_metric_fn(masks, logits):
    predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {
        "mean_iou": v1.metrics.mean_iou(masks, predicted, num_classes=2),
        "mean_per_class_accuracy": v1.metrics.mean_per_class_accuracy(masks, predicted, 2),
    }


def segmenter_model_fn(features, labels, mode, params):
    x = v1.layers.conv2d(features, 4, 3, padding="same", activation=tf.nn.relu)
    logits = v1.layers.conv2d(x, 2, 1)
    if mode == PREDICT:
        return _spec(mode, predictions={"mask": tf.argmax(logits, axis=-1)})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == EVAL:
        return _spec(mode, loss=loss, eval_metrics=(_segmentation_metric_fn, [labels, logits]))
    step = v1.train.get_global_step()
    opt = _optimizer(v1.train.AdamOptimizer(0.05), params)
    return _spec(mode, loss=loss, train_op=opt.minimize(loss, global_step=step))


# --------------------------------------------------------------------------------------
# 12. A model_fn without params: TPUEstimator refuses it.


def no_params_model_fn(features, labels, mode):
    logits = v1.layers.dense(features, 10)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    opt = v1.train.GradientDescentOptimizer(0.1)
    return _spec(mode, loss=loss,
                 train_op=opt.minimize(loss, global_step=v1.train.get_global_step()))


# --------------------------------------------------------------------------------------
# 13. A GAN: two optimizers in one train_op, var_lists filtered by scope, noise sized by
# params['batch_size'].


def _discriminator(x):
    with v1.variable_scope("discriminator", reuse=v1.AUTO_REUSE):
        x = v1.layers.dense(x, 16, activation=tf.nn.leaky_relu)
        return v1.layers.dense(x, 1)


def gan_model_fn(features, labels, mode, params):
    del labels
    noise = tf.random.uniform([params["batch_size"], 8], seed=1)
    with v1.variable_scope("generator"):
        fake = v1.layers.dense(noise, 64, activation=tf.nn.sigmoid)
    real_logits, fake_logits = _discriminator(features), _discriminator(fake)
    d_loss = (v1.losses.sigmoid_cross_entropy(tf.ones_like(real_logits), real_logits) +
              v1.losses.sigmoid_cross_entropy(tf.zeros_like(fake_logits), fake_logits))
    g_loss = v1.losses.sigmoid_cross_entropy(tf.ones_like(fake_logits), fake_logits)
    if mode == PREDICT:
        return _spec(mode, predictions={"real_probability": tf.sigmoid(real_logits[:, 0])})
    if mode == EVAL:
        if params.get("scalar_eval_tensor"):
            # One value per replica, as host_call's `tf.reshape(global_step, [1])` idiom.
            def metric_fn(d_loss):
                return {"d_loss": v1.metrics.mean(d_loss)}
            return _spec(mode, loss=g_loss, eval_metrics=(metric_fn, [tf.reshape(d_loss, [1])]))

        def metric_fn(real, fake):
            return {"real_mean": v1.metrics.mean(tf.sigmoid(real)),
                    "fake_mean": v1.metrics.mean(tf.sigmoid(fake))}
        return _spec(mode, loss=g_loss, eval_metrics=(metric_fn, [real_logits, fake_logits]))
    d_vars = v1.get_collection(v1.GraphKeys.TRAINABLE_VARIABLES, scope="discriminator")
    g_vars = v1.trainable_variables("generator")
    d_opt = _optimizer(v1.train.AdamOptimizer(1e-3, beta1=0.5, name="D_Adam"), params)
    g_opt = _optimizer(v1.train.AdamOptimizer(1e-3, beta1=0.5, name="G_Adam"), params)
    d_op = d_opt.minimize(d_loss, var_list=d_vars, global_step=v1.train.get_global_step())
    with tf.control_dependencies([d_op]):
        g_op = g_opt.minimize(g_loss, var_list=g_vars)
    return _spec(mode, loss=g_loss + d_loss, train_op=g_op)


# --------------------------------------------------------------------------------------
# 14. The TF1 input_fn idiom that returns iterator tensors instead of a dataset.


def iterator_input_fn(params):
    """Returns `(features, labels)` from `make_one_shot_iterator(dataset).get_next()`.

    In a TF1 graph those tensors yield the next batch at every session.run.
    """
    images, labels = digits("train")
    ds = tf.data.Dataset.from_tensor_slices((images.reshape(len(images), -1), labels))
    ds = ds.repeat().batch(params["batch_size"], drop_remainder=True)
    return v1.data.make_one_shot_iterator(ds).get_next()


def label_sum_model_fn(features, labels, mode, params):
    """A linear classifier that also adds up every label it trains on."""
    total = v1.get_variable("label_sum", [], tf.int64, initializer=v1.zeros_initializer(),
                            trainable=False)
    logits = v1.layers.dense(features, 10)
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    opt = _optimizer(v1.train.GradientDescentOptimizer(0.1), params)
    train_op = tf.group(opt.minimize(loss, global_step=v1.train.get_global_step()),
                        v1.assign_add(total, tf.reduce_sum(tf.cast(labels, tf.int64))))
    return _spec(mode, loss=loss, train_op=train_op)


# --------------------------------------------------------------------------------------
# Parity recipes. Plain dicts: the legacy interpreter loads this file without
# tpu_estimator_compat. Run from the repo root:
#   .venv/bin/python -m tpu_estimator_compat.parity run --recipe=tests/zoo_models.py:EMA_RECIPE \
#       --legacy_python=.venv-legacy/bin/python --work_dir=/tmp/zoo_parity --replicas=1
# Measured at commit 1ae6503 (x1): CLIPPED, EMA, FTRL, ADAM, RMSPROP, UNFUSED_BN bit-exact in
# every check (losses, weights, eval, class ids; probabilities within 1 ulp). LSTM fails on
# the shim (caching_device, see test_model_zoo.py); with that fixed it passes at x1 within
# the tanh/sigmoid envelope (loss rel <= 1.2e-7) and at x8. Replayed at x8: EMA, FTRL, ADAM,
# RMSPROP within the envelope except the padded-last-batch eval loss (parity.md gap 2);
# CLIPPED and UNFUSED_BN compute something else on 8 replicas by design (multi_replica_differs).

_TANH_SIGMOID = ("uses tf.tanh / tf.sigmoid, whose TF 2.15 and TF 2.21 CPU kernels round "
                 "differently on the same inputs (see the golden's kernel probe)")


def _recipe(name, model_fn, train, evaluate, predict, **kwargs):
    recipe = dict(name=name, module="tests/zoo_models.py", model_fn=model_fn,
                  train_input_fn=train, eval_input_fn=evaluate, predict_input_fn=predict,
                  train_batch_size=64, eval_batch_size=64, predict_batch_size=64,
                  train_steps=30, iterations_per_loop=10, save_checkpoints_steps=10,
                  full_eval_steps=9, num_predictions=16)
    recipe.update(kwargs)
    return recipe


LSTM_RECIPE = _recipe(
    "zoo_lstm", "rnn_model_fn", "image_input_fn('train')", "image_input_fn('eval')",
    "image_input_fn('eval', n=40, labels=False)", params={"learning_rate": 0.01},
    single_replica_inexact="LSTMCell " + _TANH_SIGMOID)
CLIPPED_RECIPE = _recipe(
    "zoo_clipped", "clipped_model_fn", "image_input_fn('train', flat=True)",
    "image_input_fn('eval', flat=True)", "image_input_fn('eval', n=40, labels=False, flat=True)",
    params={"learning_rate": 0.1, "clip_norm": 0.25},
    multi_replica_differs="clip_by_global_norm clips each replica's 1/N-scaled gradient "
    "before CrossShardOptimizer sums them, as on TPU cores; legacy CPU clips the whole one")
EMA_RECIPE = _recipe(
    "zoo_ema", "ema_model_fn", "image_input_fn('train', flat=True)",
    "image_input_fn('eval', flat=True)", "image_input_fn('eval', n=40, labels=False, flat=True)")
FTRL_RECIPE = _recipe(
    "zoo_ftrl", "optimizer_model_fn", "image_input_fn('train', flat=True)",
    "image_input_fn('eval', flat=True)", "image_input_fn('eval', n=40, labels=False, flat=True)",
    params={"optimizer": "ftrl"})
ADAM_RECIPE = dict(FTRL_RECIPE, name="zoo_adam", params={"optimizer": "adam"})
RMSPROP_RECIPE = dict(FTRL_RECIPE, name="zoo_rmsprop", params={"optimizer": "rmsprop"})
UNFUSED_BN_RECIPE = _recipe(
    "zoo_unfused_bn", "unfused_bn_model_fn", "image_input_fn('train', channels=True)",
    "image_input_fn('eval', channels=True)",
    "image_input_fn('eval', n=40, labels=False, channels=True)",
    multi_replica_differs="batch norm normalizes each replica's examples, as on TPU cores")
