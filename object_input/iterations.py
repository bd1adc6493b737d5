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

from collections.abc import Callable

import tensorflow as tf

from object_input.ops import _core as core
from object_input.reliability import dataset_state


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


def seeded_records(
    read: Callable[[int | tf.Tensor | None], tf.data.Dataset],
    seed: int | None,
    counter: IterationCounter | None,
) -> tf.data.Dataset:
    """``((position, salt), record)``: the records of one iteration with what each record's
    example seed is folded from (:func:`example_seed`).

    ``read(seed)`` gives the iteration's records (its passes, shuffled as the pipeline asks)
    for the iteration's seed (None when the pipeline has none). Each iterator first takes its
    iteration number from ``counter``, then reads with the shuffles and the example seeds keyed
    by the pipeline seed and that number. Given the number, nothing random depends on the
    process or the parallelism: iteration ``k`` is the same in any process.
    """
    base = seed if seed is not None else 0
    if counter is None:
        # tf.data service workers split the work through the sources at the top of the graph
        # and hold no variables: tf.data's own generators then key each iteration, anew in
        # every process.
        salts = tf.data.Dataset.random(seed=base, rerandomize_each_iteration=True)
        return _with_positions(read(seed), salts)

    def one_iteration(key: tf.Tensor) -> tf.data.Dataset:
        iteration_seed = pass_seed(base, key)
        records = read(iteration_seed if seed is not None else None)
        return _with_positions(records, tf.data.Dataset.from_tensors(iteration_seed).repeat())

    return keys(counter).flat_map(one_iteration)


def _with_positions(records: tf.data.Dataset, salts: tf.data.Dataset) -> tf.data.Dataset:
    """``((position, salt), record)``: ``salts`` gives one int64 salt per record, new each
    iteration; the position counts from the iteration's start. A zip, no function per record."""
    return tf.data.Dataset.zip((tf.data.Dataset.zip((tf.data.Dataset.counter(), salts)), records))


def example_seed(position: tf.Tensor, salt: tf.Tensor, shard: int) -> tf.Tensor:
    """The stateless seed of a record: ``fold_in([salt, shard], position)``.

    The seeds thus differ between iterations and shards, not with the parallelism.
    """
    seed = tf.stack([tf.cast(salt % (2**31), tf.int32), tf.constant(shard, tf.int32)])
    return core.fold_seed(seed, position)
