"""Which pass over a ``make_dataset`` dataset an iterator reads: the number keying its randomness.

Every random draw of an iterator (file order, record shuffle, per-example augmentation seeds)
derives from the pipeline seed and the iterator's *iteration number*, never from TensorFlow's
per-iteration seed generators, so iteration ``k`` gives the same data in any process. In this
process each new iterator takes the next number from a variable (:class:`IterationCounter`,
found with :func:`counter_of`): a finite dataset iterated again, as Keras does every epoch, gets
new, reproducible randomness.

:class:`object_input.SyncEpochs` (a Keras callback) sets the number to Keras's epoch in
``on_epoch_begin``: epoch ``k`` of ``fit`` reads iteration ``k``, and a run resumed at epoch
``k`` by ``keras.callbacks.BackupAndRestore`` reads exactly the data that epoch ``k`` of an
uninterrupted run read (docs/reliability.md).
"""

from __future__ import annotations

import tensorflow as tf

from object_input import dataset_state


class IterationCounter(tf.Module):
    """The number the next iterator of a dataset gets: a variable read and advanced as it starts.

    A ``tf.Module``: put it in a ``tf.train.Checkpoint`` next to the iterator, so that the
    iterators made after a restore continue the numbering.
    """

    def __init__(self) -> None:
        super().__init__(name="iteration_counter")
        self.next = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="next")

    def start(self) -> tf.Tensor:
        """This iteration's number, advancing the counter for the next (graph op)."""
        return self.next.assign_add(1) - 1

    def set(self, number: int) -> None:
        """Give the next iterator the number ``number``."""
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValueError(f"an iteration number is an integer >= 0, got {number!r}")
        self.next.assign(number)


def keys(counter: IterationCounter) -> tf.data.Dataset:
    """One element per iterator: its iteration number, taken from ``counter`` as it starts."""
    return tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)).map(lambda _: counter.start())


def pass_seed(seed: int, key: tf.Tensor) -> tf.Tensor:
    """The int64 seed of iteration ``key`` of a pipeline seeded with ``seed`` (in [0, 2**31))."""
    pair = tf.stack([tf.constant(seed & 0x7FFFFFFF, tf.int64), tf.cast(key, tf.int64)])
    return tf.random.stateless_uniform([], pair, minval=0, maxval=2**31 - 1, dtype=tf.int64)


def attach(dataset: tf.data.Dataset, counter: IterationCounter) -> tf.data.Dataset:
    """Remember ``counter`` on ``dataset`` for :func:`counter_of` and :class:`SyncEpochs`."""
    return dataset_state.attach(dataset, "iterations", counter)


def counter_of(dataset: tf.data.Dataset) -> IterationCounter:
    """The :class:`IterationCounter` of a ``make_dataset`` dataset."""
    return dataset_state.attached(
        dataset,
        "iterations",
        "no iteration counter on this dataset",
        "with service= the pipeline runs on the workers, which cannot hold this process's "
        "variables",
    )
