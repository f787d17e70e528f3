"""An input_fn built on TF1 queues (`QueueRunner`, `tf.compat.v1.train.batch`, ...) as a dataset.

TF1 input pipelines made of queues and queue-runner threads (`tf.queue.FIFOQueue` fed by a
`QueueRunner`, `tf.compat.v1.train.limit_epochs`, `batch`, `shuffle_batch`,
`string_input_producer`) cannot be built eagerly: TF refuses them with "... not supported
when eager execution is enabled". Legacy's Estimator built input_fn into its TF1 graph and
its MonitoredSession started the queue runners; every `session.run` dequeued the next batch,
and a queue closed after its last epoch ended the input (`OutOfRangeError`).

`queue_dataset` gives the same batches, in the same order, with the same end: it builds
input_fn into a graph of its own, and a dataset generator runs that graph in a
`tf.compat.v1.Session` with its queue runners started, yielding one `session.run` of
input_fn's tensors per element until the queues run dry. Only the input pipeline runs there;
the model runs in the engine's compiled loops as for any other dataset.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator

import tensorflow as tf

from tpu_estimator_compat import log as logging
from tpu_estimator_compat.inputs.call import plain_graph

_v1 = tf.compat.v1

# TF's refusals of queue-based input under eager execution (QueueRunner, input producers,
# `batch`/`shuffle_batch` and their `_join` and `maybe_` forms).
_QUEUE_REFUSAL = re.compile(r"[Qq]ueue.*not supported when eager execution is enabled")


def is_queue_refusal(error: BaseException) -> bool:
    """Whether `error` is TF refusing a queue-based input pipeline under eager execution."""
    return isinstance(error, (RuntimeError, ValueError)) and bool(
        _QUEUE_REFUSAL.search(str(error)))


def queue_dataset(call_input_fn: Callable[[], Any], seed: int | None = None) -> tf.data.Dataset:
    """The dataset of what input_fn's tensors give at each `session.run` of its own graph.

    `call_input_fn()` calls the user's input_fn; it is called once, into a new graph
    (whose seed is `seed`, as legacy set `tf_random_seed` on its graph before input_fn).
    """
    graph = tf.Graph()
    with graph.as_default():
        if seed is not None:
            _v1.set_random_seed(seed)
        result = call_input_fn()
        if isinstance(result, (tuple, list)) and len(result) == 2 and result[1] is None:
            result = result[0]  # (features, None): features alone, as `split_element` reads.
        if isinstance(result, tf.data.Dataset):
            raise ValueError(
                "input_fn built TF1 queues and returned a tf.data.Dataset; return the "
                "queues' tensors (features, labels), or build the input with tf.data only.")
        flat = tf.nest.flatten(result, expand_composites=True)
        if not flat or not all(isinstance(t, tf.Tensor) for t in flat):
            raise TypeError(
                "input_fn built TF1 queues; it must return `(features, labels)` or `features` "
                f"of tensors of its graph, received {result!r:.200}.")
        init = [_v1.global_variables_initializer(), _v1.local_variables_initializer(),
                _v1.tables_initializer()]
    logging.info("input_fn uses TF1 queue runners: its graph runs in a session of its own "
                 "that feeds the dataset, one session.run per batch, as legacy's did.")
    specs = tuple(tf.TensorSpec(t.shape, t.dtype) for t in flat)

    def generator() -> Iterator[tuple[Any, ...]]:
        with _v1.Session(graph=graph) as session:
            session.run(init)
            coordinator = _v1.train.Coordinator()
            threads = _v1.train.start_queue_runners(session, coordinator)
            try:
                while not coordinator.should_stop():
                    try:
                        values = session.run(flat)
                    except tf.errors.OutOfRangeError:
                        return
                    yield tuple(values)
            finally:
                coordinator.request_stop()  # The runners close their queues on it.
                coordinator.join(threads, stop_grace_period_secs=5)

    def restructure(*components: Any) -> Any:
        return tf.nest.pack_sequence_as(result, list(components), expand_composites=True)

    dataset = tf.data.Dataset.from_generator(generator, output_signature=specs)
    return dataset.map(plain_graph(restructure))
