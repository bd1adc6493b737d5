"""Which pass over a ``make_dataset`` dataset an iterator reads, and where in it the iterator is.

Every random draw of an iterator (file order, record shuffle, per-example augmentation seeds)
derives from the pipeline seed and the iterator's *iteration number*, never from TensorFlow's
per-iteration seed generators, so iteration ``k`` gives the same data in any process. In this
process each new iterator takes the next number from :class:`Progress` (found with
:func:`progress_of`): a finite dataset iterated again, as Keras does every epoch, gets new,
reproducible randomness. :class:`Progress` also follows the iterator's place in its iteration
(:mod:`object_input.place`): in a checkpoint, a few integers from which a fresh process continues
the stream exactly.

:class:`object_input.SyncEpochs` (a Keras callback) sets the number to Keras's epoch in
``on_epoch_begin``: epoch ``k`` of ``fit`` reads iteration ``k``, and a run resumed at epoch
``k`` by ``keras.callbacks.BackupAndRestore`` reads exactly the data that epoch ``k`` of an
uninterrupted run read (docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Callable

import tensorflow as tf

from object_input import place
from object_input._maps import map_on_cpu
from object_input.ops import _core as core
from object_input.reliability import dataset_state


class Progress(tf.__internal__.tracking.Trackable):
    """Where a dataset's iterators are: the number the next one reads, and the place
    (:mod:`object_input.place`) of the one being read, a few integers.

    Put it in a ``tf.train.Checkpoint`` (``progress_of(dataset)``) instead of the iterator: it
    saves the place of the last batch handed out (a finished iteration saves the start of the
    next), and after a restore the next iterator made continues from there, exactly, in any
    process. :meth:`state` and :meth:`resume` do the same through a plain int64 vector.
    """

    def __init__(self, num_shards: int = 1, shard_index: int = 0) -> None:
        self.shards = (num_shards, shard_index)
        self._next = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="next")
        empty = tf.zeros([0], tf.int64)
        vector = tf.TensorShape([None])
        # A place to resume from, set by a restore and taken by the next iterator as it starts.
        self._resume = tf.Variable(empty, trainable=False, shape=vector, name="resume")
        # The starting place of the latest iterator, read by its first batch.
        self._start = tf.Variable(place.start(0), trainable=False, shape=vector, name="start")
        # The place after the last batch handed out; empty when no iteration is under way.
        self._place = tf.Variable(empty, trainable=False, shape=vector, name="place")

    def start(self) -> tf.Tensor:
        """The starting place of an iterator that starts now: a pending resume, else the start
        of the next iteration; the number after it goes to the next iterator (graph op)."""
        pending = self._resume.read_value()
        fresh = place.start(self._next.read_value())
        chosen = tf.cond(tf.size(pending) > 0, lambda: pending, lambda: fresh)
        with tf.control_dependencies([chosen]):
            updates = [
                self._resume.assign(tf.zeros([0], tf.int64)),
                self._next.assign(chosen[0] + 1),
                self._start.assign(chosen),
            ]
        with tf.control_dependencies(updates):
            return tf.identity(chosen)

    def read_start(self) -> tf.Tensor:
        """The starting place of the latest iterator."""
        return self._start.read_value()

    def write(self, current: tf.Tensor) -> tf.Operation:
        """Record ``current``, the place after a batch handed out (empty: the iteration ended)."""
        return self._place.assign(current).op

    def state(self) -> tf.Tensor:
        """The place to continue from: the iteration under way, after its last batch handed
        out; else the start of the next iteration (int64 vector)."""
        current = self._place.read_value()
        return tf.cond(
            tf.size(current) > 0, lambda: current, lambda: place.start(self._next.read_value())
        )

    def resume(self, state: tf.Tensor | list[int]) -> None:
        """Make the next iterator continue from ``state`` (what :meth:`state` returned)."""
        state = tf.convert_to_tensor(state, tf.int64)
        if state.shape.rank != 1 or int(tf.size(state)) < 3 or int(state[0]) < 0:
            raise ValueError(f"not the state of a make_dataset iterator: {state.numpy()!r}")
        self._resume.assign(state)
        self._next.assign(state[0])
        self._place.assign(tf.zeros([0], tf.int64))

    def set(self, number: int) -> None:
        """Give the next iterator the number ``number``, from its start."""
        if not isinstance(number, int) or isinstance(number, bool) or number < 0:
            raise ValueError(f"an iteration number is an integer >= 0, got {number!r}")
        self.resume(place.start(number))

    def _serialize_to_tensors(self) -> dict[str, tf.Tensor]:
        return {"place": self.state(), "shards": tf.constant(self.shards, tf.int64)}

    def _restore_from_tensors(self, restored_tensors: dict[str, tf.Tensor]) -> tf.Operation:
        state = restored_tensors["place"]
        shards = tuple(int(n) for n in restored_tensors["shards"])
        if shards[0] != self.shards[0] and (int(state[1]) or int(state[2])):
            raise ValueError(
                f"this place was saved by shard {shards[1]} of {shards[0]} input shards, "
                f"inside iteration {int(state[0])}; this pipeline reads {self.shards[0]} shards. "
                "A place inside an iteration is a place in one shard's stream: restore it with "
                f"{shards[0]} shards, or start the next iteration on {self.shards[0]} shards "
                f"(progress.set({int(state[0]) + 1}))"
            )
        self.resume(state)
        return tf.no_op()


def keys(progress: Progress) -> tf.data.Dataset:
    """One element per iterator: its starting place, taken from ``progress`` as it starts."""
    one = tf.data.Dataset.from_tensors(tf.constant(0, tf.int64))
    return map_on_cpu(one, lambda _: progress.start())


def pass_seed(seed: int, key: tf.Tensor) -> tf.Tensor:
    """The int64 seed of iteration ``key`` of a pipeline seeded with ``seed`` (in [0, 2**31))."""
    pair = tf.stack([tf.constant(seed & 0x7FFFFFFF, tf.int64), tf.cast(key, tf.int64)])
    return tf.random.stateless_uniform([], pair, minval=0, maxval=2**31 - 1, dtype=tf.int64)


def attach(dataset: tf.data.Dataset, progress: Progress) -> tf.data.Dataset:
    """Remember ``progress`` on ``dataset`` for :func:`progress_of` and :class:`SyncEpochs`."""
    return dataset_state.attach(dataset, "iterations", progress)


def progress_of(dataset: tf.data.Dataset) -> Progress:
    """The :class:`Progress` of a ``make_dataset`` dataset."""
    return dataset_state.attached(
        dataset,
        "iterations",
        "no progress on this dataset",
        "with service= the pipeline runs on the workers, which cannot hold this process's "
        "variables",
    )


#: What a restored iterator does with the records delivered before its place that it reads
#: again: nothing is read again (``NO_REPLAY``: nothing holds examples back past a place), the
#: reader drops them (``DROP_REPLAYED``: the aspect-ratio buckets held later records), or they
#: carry a flag for the pipeline to drop after their partner groups form (``FLAG_REPLAYED``).
NO_REPLAY, DROP_REPLAYED, FLAG_REPLAYED = "none", "drop", "flag"


def seeded_records(
    read: Callable[[int | tf.Tensor | None], tf.data.Dataset],
    seed: int | None,
    progress: Progress | None,
    *,
    replayed: str = NO_REPLAY,
) -> tf.data.Dataset:
    """``((position, salt[, replayed]), record)``: the records of one iteration with what each
    record's example seed is folded from (:func:`example_seed`), and with ``FLAG_REPLAYED``
    whether it was delivered before the place the iterator resumes from.

    ``read(seed)`` gives the iteration's records (its passes, shuffled as the pipeline asks)
    for the iteration's seed (None when the pipeline has none). Each iterator first takes its
    starting place from ``progress`` (:mod:`object_input.place`), then reads with the shuffles
    and the example seeds keyed by the pipeline seed and its iteration number, passing over the
    records before the place's restart undecoded. Given the place, nothing random depends on
    the process or the parallelism: iteration ``k`` is the same in any process.
    """
    base = seed if seed is not None else 0
    if progress is None:
        # tf.data service workers split the work through the sources at the top of the graph
        # and hold no variables: tf.data's own generators then key each iteration, anew in
        # every process.
        salts = tf.data.Dataset.random(seed=base, rerandomize_each_iteration=True)
        return _with_positions(read(seed), 0, salts, None)

    def one_iteration(starting_place: tf.Tensor) -> tf.data.Dataset:
        iteration, restart, seen, delivered = place.unpack(starting_place)
        iteration_seed = pass_seed(base, iteration)
        read_seed = iteration_seed if seed is not None else None
        salts = tf.data.Dataset.from_tensors(iteration_seed).repeat()
        if replayed == FLAG_REPLAYED:
            return _with_positions(read(read_seed).skip(restart), restart, salts, delivered)
        if replayed == NO_REPLAY:
            return _with_positions(read(read_seed).skip(restart), restart, salts, None)
        # The records the buckets held, then, read anew, the rest: a filter on the first
        # alone, so the stream past the place costs no function per record.
        held = read(read_seed).skip(restart).take(seen - restart)
        held = _with_positions(held, restart, salts, delivered).filter(
            lambda parts, record: tf.logical_not(parts[2])
        )
        held = map_on_cpu(held, lambda parts, record: (parts[:2], record))
        rest = _with_positions(read(read_seed).skip(seen), seen, salts, None)
        return held.concatenate(rest)

    return keys(progress).flat_map(one_iteration)


def _with_positions(
    records: tf.data.Dataset,
    first: int | tf.Tensor,
    salts: tf.data.Dataset,
    replayed: tf.Tensor | None,
) -> tf.data.Dataset:
    """``((position, salt[, replayed]), record)``: positions count from ``first``, ``salts``
    gives one int64 salt per record, new each iteration, and ``replayed`` (None: no flags)
    flags the first records (the rest are not). Zips, no function per record."""
    parts = [tf.data.Dataset.counter(first), salts]
    if replayed is not None:
        parts.append(
            tf.data.Dataset.from_tensor_slices(replayed).concatenate(
                tf.data.Dataset.from_tensors(tf.constant(False)).repeat()
            )
        )
    return tf.data.Dataset.zip((tf.data.Dataset.zip(tuple(parts)), records))


def example_seed(position: tf.Tensor, salt: tf.Tensor, shard: int) -> tf.Tensor:
    """The stateless seed of a record: ``fold_in([salt, shard], position)``.

    The seeds thus differ between iterations and shards, not with the parallelism.
    """
    seed = tf.stack([tf.cast(salt % (2**31), tf.int32), tf.constant(shard, tf.int32)])
    return core.fold_seed(seed, position)
