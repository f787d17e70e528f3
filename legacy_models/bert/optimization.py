# BERT-style fine-tuning optimisation: Adam with decoupled weight decay, warmup + decay.
"""`create_optimizer(loss, ...)` returns the train op the way BERT's fine-tuning built it.

- Learning rate: linear warmup from 0 to `init_lr` over `num_warmup_steps`, then linear
  (power-1 polynomial) decay to 0 at `num_train_steps`, both computed from the global step.
- `AdamWeightDecayOptimizer`: a `tf.train.Optimizer` subclass that overrides
  `apply_gradients` and keeps its moments in plain `tf.get_variable`s named
  `<param>/adam_m` and `<param>/adam_v`. It applies Adam *without* bias correction and adds
  weight decay to the update (not to the loss), skipping LayerNorm and bias parameters.
  It ignores `global_step`, so the caller increments the step itself.
- Gradients come from `tf.gradients` over `tf.trainable_variables()`, are clipped to global
  norm 1, and the optimizer is wrapped in `tf.tpu.CrossShardOptimizer` on TPU, whose
  `apply_gradients` sums the gradients over cores before delegating.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import re

import tensorflow.compat.v1 as tf


def learning_rate_schedule(init_lr, global_step, num_train_steps, num_warmup_steps):
    """Warmup to `init_lr` in `num_warmup_steps`, then linear decay to 0 at the end."""
    decayed = tf.train.polynomial_decay(
        tf.constant(init_lr, dtype=tf.float32), global_step, num_train_steps,
        end_learning_rate=0.0, power=1.0, cycle=False)
    if not num_warmup_steps:
        return decayed
    step = tf.cast(tf.cast(global_step, tf.int32), tf.float32)
    warmup = init_lr * step / float(num_warmup_steps)
    in_warmup = tf.cast(step < float(num_warmup_steps), tf.float32)
    return in_warmup * warmup + (1.0 - in_warmup) * decayed


def create_optimizer(loss, init_lr, num_train_steps, num_warmup_steps, use_tpu):
    """Returns the train op: clipped gradients, AdamWeightDecay, global step + 1."""
    global_step = tf.train.get_or_create_global_step()
    learning_rate = learning_rate_schedule(init_lr, global_step, num_train_steps,
                                           num_warmup_steps)
    optimizer = AdamWeightDecayOptimizer(
        learning_rate=learning_rate,
        weight_decay_rate=0.01,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    if use_tpu:
        optimizer = tf.tpu.CrossShardOptimizer(optimizer)

    tvars = tf.trainable_variables()
    grads = tf.gradients(loss, tvars)
    grads, _ = tf.clip_by_global_norm(grads, clip_norm=1.0)
    train_op = optimizer.apply_gradients(zip(grads, tvars), global_step=global_step)

    # AdamWeightDecayOptimizer does not touch global_step: step it here.
    new_global_step = global_step + 1
    return tf.group(train_op, [global_step.assign(new_global_step)])


class AdamWeightDecayOptimizer(tf.train.Optimizer):
    """Adam with decoupled L2 weight decay, as used to fine-tune BERT.

    Unlike `tf.train.AdamOptimizer` there is no bias correction of the moments, the decay
    term `weight_decay_rate * param` is added to the Adam update (so it does not interact
    with the moment estimates), and parameters whose name matches a pattern in
    `exclude_from_weight_decay` are not decayed.
    """

    def __init__(self,
                 learning_rate,
                 weight_decay_rate=0.0,
                 beta_1=0.9,
                 beta_2=0.999,
                 epsilon=1e-6,
                 exclude_from_weight_decay=None,
                 name="AdamWeightDecayOptimizer"):
        super(AdamWeightDecayOptimizer, self).__init__(False, name)
        self.learning_rate = learning_rate
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay = exclude_from_weight_decay or []

    def _moment(self, param_name, param, suffix):
        return tf.get_variable(
            name=param_name + "/" + suffix,
            shape=param.shape.as_list(),
            dtype=tf.float32,
            trainable=False,
            initializer=tf.zeros_initializer())

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Returns one op that updates every (param, adam_m, adam_v); ignores global_step."""
        del global_step  # The caller increments it (see create_optimizer).
        updates = []
        for grad, param in grads_and_vars:
            if grad is None or param is None:
                continue
            param_name = self._variable_name(param.name)
            m = self._moment(param_name, param, "adam_m")
            v = self._moment(param_name, param, "adam_v")

            # tf.multiply densifies IndexedSlices (gradients of tf.gather lookups).
            next_m = tf.multiply(self.beta_1, m) + tf.multiply(1.0 - self.beta_1, grad)
            next_v = (tf.multiply(self.beta_2, v)
                      + tf.multiply(1.0 - self.beta_2, tf.square(grad)))
            step = next_m / (tf.sqrt(next_v) + self.epsilon)
            if self._use_weight_decay(param_name):
                step += self.weight_decay_rate * param

            updates.append(param.assign(param - self.learning_rate * step))
            updates.append(m.assign(next_m))
            updates.append(v.assign(next_v))
        return tf.group(*updates, name=name)

    def _use_weight_decay(self, param_name):
        if not self.weight_decay_rate:
            return False
        return not any(re.search(pattern, param_name)
                       for pattern in self.exclude_from_weight_decay)

    @staticmethod
    def _variable_name(param_name):
        """'bert/x/kernel:0' -> 'bert/x/kernel'."""
        return re.sub(r":\d+$", "", param_name)
