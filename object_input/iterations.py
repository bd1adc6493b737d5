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

import dataclasses
from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np
import tensorflow as tf

from object_input import place
from object_input.ops import _core as core
from object_input.reliability import dataset_state
from object_input.tracing import stages
from object_input.tracing.maps import map_on_cpu

#: Record ids hash to int64 keys in [0, 2**63 - 1): two ids of a pass share a key with a
#: probability of about one in 10**19 per pair.
_KEY_SPACE = 2**63 - 1
#: Added to a key once per pass before the record's (an odd constant, so that the passes of
#: one record spread over the key space); the keys of pass 0 are the ids' hashes.
_PASS_STEP = 0x1E3779B97F4A7C15
#: The pass length of an iteration of one pass: every position is in pass 0.
_ONE_PASS = np.iinfo(np.int64).max


@dataclasses.dataclass(frozen=True)
class ShardReads:
    """How a pipeline reads an iteration's records as any shard of any number of input shards:
    what :meth:`Progress.resume_shards` reads again (record ids only, nothing decoded).

    Attributes:
      read: ``read(num_shards, shard_index)`` is that shard's one-pass ``read(seed)`` (see
        :func:`seeded_records`).
      seed: the pipeline seed.
      passes: passes over the data in one iteration (``num_epochs``; None: without end).
      reproducible: whether an iteration's record order is a function of its seed (a seed or
        no shuffle, and a deterministic order).
    """

    read: Callable[[int, int], place.Read]
    seed: int | None
    passes: int | None
    reproducible: bool


class ShardState(NamedTuple):
    """What :meth:`Progress.state` returned on input shard ``shard_index`` of ``num_shards``."""

    num_shards: int
    shard_index: int
    state: tf.Tensor | np.ndarray | list[int]


class Progress(tf.__internal__.tracking.Trackable):
    """Where a dataset's iterators are: the number the next one reads, and the place
    (:mod:`object_input.place`) of the one being read, a few integers.

    Put it in a ``tf.train.Checkpoint`` (``progress_of(dataset)``) instead of the iterator: it
    saves the place of the last batch handed out (a finished iteration saves the start of the
    next), and after a restore the next iterator made continues from there, exactly, in any
    process. :meth:`state` and :meth:`resume` do the same through a plain int64 vector.
    :meth:`resume_shards` continues an iteration that another number of input shards began.
    """

    # How to read the shards again for a re-shard: eager work, in no trace of the pipeline
    # (tracing.trace_cache keys stage functions by what they hold).
    _untraced = frozenset({"_reads"})

    def __init__(
        self, num_shards: int = 1, shard_index: int = 0, reads: ShardReads | None = None
    ) -> None:
        self.shards = (num_shards, shard_index)
        self._reads = reads
        self._next = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="next")
        empty = tf.zeros([0], tf.int64)
        vector = tf.TensorShape([None])
        # A place to resume from, set by a restore and taken by the next iterator as it starts.
        self._resume = tf.Variable(empty, trainable=False, shape=vector, name="resume")
        # The starting place of the latest iterator, read by its first batch.
        self._start = tf.Variable(place.start(0), trainable=False, shape=vector, name="start")
        # The place after the last batch handed out; empty when no iteration is under way.
        self._place = tf.Variable(empty, trainable=False, shape=vector, name="place")
        # ``[iteration, pass length, sorted keys...]``: the records of that iteration that other
        # shards delivered before a re-shard (:meth:`resume_shards`), left out of its stream
        # (keys of ``(record id, pass)``); empty when none are.
        self._consumed = tf.Variable(empty, trainable=False, shape=vector, name="consumed")

    def start(self) -> tf.Tensor:
        """The starting place of an iterator that starts now: a pending resume, else the start
        of the next iteration; the number after it goes to the next iterator (graph op)."""
        chosen = self._upcoming()
        with tf.control_dependencies([chosen]):
            updates = [
                self._resume.assign(tf.zeros([0], tf.int64)),
                self._next.assign(chosen[0] + 1),
                self._start.assign(chosen),
                # Another iteration: the records consumed in the re-sharded one are dropped.
                self._consumed.assign(_consumed_in(self._consumed.read_value(), chosen[0])),
            ]
        with tf.control_dependencies(updates):
            return tf.identity(chosen)

    def _upcoming(self) -> tf.Tensor:
        """Where the next iterator starts: a pending resume, else the next iteration's start."""
        pending = self._resume.read_value()
        return tf.cond(
            tf.size(pending) > 0, lambda: pending, lambda: place.start(self._next.read_value())
        )

    def consumed(self) -> tf.Tensor:
        """``[iteration, pass length, sorted keys...]``: the records other input shards
        delivered in that iteration before a re-shard, which this shard's stream of it leaves
        out (:func:`record_keys`), and the records in one pass of that stream; empty: none."""
        return self._consumed.read_value()

    def read_start(self) -> tf.Tensor:
        """The starting place of the latest iterator."""
        return self._start.read_value()

    def write(self, current: tf.Tensor) -> tf.Operation:
        """Record ``current``, the place after a batch handed out (empty: the iteration ended)."""
        return self._place.assign(current).op

    def state(self) -> tf.Tensor:
        """The place to continue from: the iteration under way, after its last batch handed
        out; else where the next iterator starts (a resume not yet taken, or the next
        iteration's start; int64 vector). In an iteration that
        :meth:`resume_shards` re-sharded, the pass length and the keys of the records other
        shards delivered follow the place (8 bytes a record)."""
        current = self._place.read_value()
        chosen = tf.cond(tf.size(current) > 0, lambda: current, self._upcoming)
        return tf.concat([chosen, _consumed_in(self._consumed.read_value(), chosen[0])[1:]], 0)

    def resume(self, state: tf.Tensor | np.ndarray | list[int]) -> None:
        """Make the next iterator continue from ``state`` (what :meth:`state` returned)."""
        where, consumed = _split(state)
        self._resume.assign(where)
        self._next.assign(where[0])
        self._place.assign(tf.zeros([0], tf.int64))
        self._consumed.assign(
            np.concatenate([where[:1], consumed]) if consumed.size else np.zeros([0], np.int64)
        )

    def resume_shards(self, states: Iterable[ShardState | tuple]) -> None:
        """Continue, on this pipeline's input shards, the iteration that the states of *every*
        input shard of another number were saved in: each :class:`ShardState` (or
        ``(num_shards, shard_index, state)``) gives one old shard's :meth:`state`.

        The next iterator reads this shard's records of that iteration but those the old shards
        delivered (their streams are read again up to their places, ids only, nothing decoded):
        once every new shard resumed from the same states, the iteration ends with no record
        repeated or lost. Later iterations run as on this number of shards. An old shard whose
        state is the start of the next iteration finished its share. Call it eagerly, before
        the iterator is made (docs/reliability.md, "On another number of input shards")."""
        states = [ShardState(int(n), int(i), s) for n, i, s in states]
        if self._reads is None:
            raise ValueError("resume_shards needs the Progress of a make_dataset pipeline")
        number = _check_split(states)
        splits = [_split(s.state) for s in sorted(states, key=lambda s: s.shard_index)]
        iteration = min(int(where[0]) for where, _ in splits)
        # A shard that finished the iteration saved the start of the next: it delivered (or
        # dropped) all of its share.
        shards = [
            (where, keys, int(where[0]) == iteration + 1 and not where[2] and not keys.size)
            for where, keys in splits
        ]
        _common("iteration", [iteration if done else int(w[0]) for w, _, done in shards], states)
        # A shard resumed by an earlier re-shard: its state ends with the consumed set.
        consumed = _common(
            "re-sharded set", [tuple(tail[1:]) for _, tail, done in shards if not done], states
        )
        reads = self._reads
        if consumed or any(done or where[2] for where, _, done in shards):
            _check_resharding(reads)
        if all(done for *_, done in shards):
            self.set(iteration + 1)
            return
        seed = _read_seed(reads.seed, iteration)
        # The pass length the shard's filter had, else that of its stream (nothing read for a
        # shard that delivered nothing).
        lengths = [
            tail[0]
            if tail.size
            else _pass_length(reads, reads.read(number, index), seed)
            if done or where[2]
            else 0
            for index, (where, tail, done) in enumerate(shards)
        ]
        # Every old shard delivered all of its share of the passes before the first one under
        # way: the new shards start there.
        first = min(
            int(where[1]) // length if where[2] else 0
            for (where, _, done), length in zip(shards, lengths, strict=True)
            if not done
        )
        delivered = [np.asarray(consumed, np.int64)]
        for index, ((where, _, done), length) in enumerate(zip(shards, lengths, strict=True)):
            if done or where[2]:
                read = reads.read(number, index)
                keys = _delivered_keys(reads, read, seed, first * length, length, where, done)
                delivered.append(keys[~np.isin(keys, delivered[0])])
        keys = np.concatenate(delivered)
        if np.unique(keys).size != keys.size:
            raise ValueError(
                "the old shards delivered records with the same record id: re-sharding needs "
                "record ids unique within a pass"
            )
        length = _pass_length(reads, reads.read(*self.shards), seed) if keys.size or first else 0
        begin = first * length
        where = np.array([iteration, begin, begin], np.int64)
        self.resume(np.concatenate([where, [length], np.sort(keys)]) if keys.size else where)

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
                f"{shards[0]} shards, or collect the states of all {shards[0]} old shards "
                "(oi.iterations.saved_shard_state(path) of each one's checkpoint) and call "
                "progress.resume_shards(states) on every new shard"
            )
        self.resume(state)
        return tf.no_op()


def saved_shard_state(path: str) -> ShardState:
    """The :class:`ShardState` a ``tf.train.Checkpoint`` at ``path`` (a prefix, or a folder:
    its latest checkpoint) holds of its one :class:`Progress`."""
    reader = tf.train.load_checkpoint(path)
    places = [name for name in reader.get_variable_to_shape_map() if name.endswith("/place")]
    if len(places) != 1:
        raise ValueError(
            f"the checkpoint {path} holds {len(places)} input places, not one: "
            "read the state and shards of the Progress you mean with tf.train.load_checkpoint"
        )
    num_shards, shard_index = reader.get_tensor(places[0][: -len("place")] + "shards")
    return ShardState(int(num_shards), int(shard_index), reader.get_tensor(places[0]))


def _split(state: tf.Tensor | np.ndarray | list[int]) -> tuple[np.ndarray, np.ndarray]:
    """``(place, consumed keys)`` of what :meth:`Progress.state` returned."""
    vector = np.asarray(state, np.int64)
    if vector.ndim != 1 or vector.size < 3 or vector[0] < 0 or not 0 <= vector[1] <= vector[2]:
        raise ValueError(f"not the state of a make_dataset iterator: {vector!r}")
    end = place.length(int(vector[1]), int(vector[2]))
    if vector.size < end:
        raise ValueError(f"not the state of a make_dataset iterator: {vector!r}")
    return vector[:end], vector[end:]


def _check_split(states: list[ShardState]) -> int:
    """The number of input shards ``states`` were saved by, one state of each."""
    numbers = sorted({s.num_shards for s in states})
    if len(numbers) != 1:
        raise ValueError(f"states saved by {numbers} input shards: give those of one split")
    indices = sorted(s.shard_index for s in states)
    if indices != list(range(numbers[0])):
        raise ValueError(
            f"the states of {numbers[0]} input shards are those of shards 0 to "
            f"{numbers[0] - 1}, one each; got shards {indices}"
        )
    return numbers[0]


def _check_resharding(reads: ShardReads) -> None:
    """Raise unless the old shards' streams of an iteration can be read again as they were."""
    if not reads.reproducible:
        raise ValueError(
            "a place inside an iteration moves to other shards only when the record order "
            "is a function of the seed: give make_dataset a seed (or shuffle=False) and "
            "keep deterministic=True"
        )


def _common(what: str, values: list, states: list[ShardState]):
    """The one ``what`` of every state."""
    if len(set(values)) != 1:
        raise ValueError(
            f"the states of shards {[s.shard_index for s in states]} differ in their {what}: "
            "give the states the shards saved at one time"
        )
    return values[0]


def _applies(consumed: tf.Tensor, iteration: tf.Tensor) -> tf.Tensor:
    """Whether ``consumed`` (as :meth:`Progress.consumed` holds it) is of ``iteration``."""
    return tf.reduce_any(consumed[:1] == iteration)


def _consumed_in(consumed: tf.Tensor, iteration: tf.Tensor) -> tf.Tensor:
    """``consumed`` where it is of ``iteration``, else empty."""
    return tf.cond(_applies(consumed, iteration), lambda: consumed, lambda: tf.zeros([0], tf.int64))


def record_keys(record_ids: tf.Tensor, passes: tf.Tensor | int = 0) -> tf.Tensor:
    """The int64 keys that stand for records (their ids, read in pass ``passes`` of their
    iteration) in a re-sharded iteration's consumed set."""
    key = tf.strings.to_hash_bucket_fast(record_ids, _KEY_SPACE)
    step = tf.cast(passes, tf.int64) * tf.constant(_PASS_STEP, tf.int64)
    # Wraps around in two's complement; the sign bit is cleared.
    return tf.bitwise.bitwise_and(key + step, tf.constant(_KEY_SPACE, tf.int64))


def _fresh(key: tf.Tensor, keys: tf.Tensor | np.ndarray) -> tf.Tensor:
    """Whether ``key`` is not among the sorted ``keys``."""
    keys = tf.convert_to_tensor(keys, tf.int64)
    index = tf.searchsorted(keys, key[tf.newaxis])[0]
    return tf.logical_not(tf.reduce_any(keys[index : index + 1] == key))


def _unconsumed(
    positioned: tf.data.Dataset, iteration: tf.Tensor, consumed: tf.Tensor
) -> tf.data.Dataset:
    """``((position, ...), record)`` elements but the records in ``consumed`` when it is of
    ``iteration``: a filter then, no function per record otherwise."""

    @tf.autograph.experimental.do_not_convert
    def unseen(parts: tuple, record: tuple) -> tf.Tensor:
        return _fresh(record_keys(record[0], parts[0] // consumed[1]), consumed[2:])

    return tf.cond(
        _applies(consumed, iteration), lambda: positioned.filter(unseen), lambda: positioned
    )


def _pass_length(reads: ShardReads, read: place.Read, seed: tf.Tensor | None) -> int:
    """The records in one pass of a shard's stream (every pass reads the shard's records once
    each): read once, ids only."""
    if reads.passes == 1:
        return _ONE_PASS
    return int(place.count(read(seed, shuffled=False)))


def _delivered_keys(
    reads: ShardReads,
    read: place.Read,
    seed: tf.Tensor | None,
    start: int,
    length: int,
    where: np.ndarray,
    done: bool,
) -> np.ndarray:
    """The keys of the records of a shard's stream of an iteration, from position ``start``
    (where a pass begins) on, that the place ``where`` in it says were delivered (or dropped);
    all of them when the shard is ``done``."""
    records = place.stream(read, seed, reads.passes, start, length)
    if done:
        return _keys(records, start, length)
    _, restart, seen, bits = place.unpack(tf.constant(where))
    delivered = _keys(records.take(int(seen) - start), start, length)
    if delivered.size < int(seen) - start:
        raise ValueError(
            f"a place {int(seen)} records into its shard's stream, which holds "
            f"{start + delivered.size}: the states are not of this pipeline (its data, seed and "
            "options)"
        )
    return delivered[np.concatenate([np.ones([int(restart) - start], bool), bits.numpy()])]


def _keys(records: tf.data.Dataset, start: int, length: int) -> np.ndarray:
    """The keys of a stream's records (``(record_id, ...)`` elements, the first at position
    ``start``, ``length`` to a pass), in order."""
    keys = map_on_cpu(
        records.enumerate(start),
        lambda position, record: record_keys(record[0], position // length),
    )
    return np.concatenate([np.zeros([0], np.int64), *keys.batch(4096).as_numpy_iterator()])


def _read_seed(seed: int | None, iteration: tf.Tensor) -> tf.Tensor | None:
    """The seed ``read`` takes in ``iteration``: None when the pipeline has none."""
    return pass_seed(seed, iteration) if seed is not None else None


def keys(progress: Progress, seed: int | None) -> tf.data.Dataset:
    """One element per iterator: its starting place, taken from ``progress`` as it starts, the
    records consumed in a re-sharded iteration (:meth:`Progress.consumed`), and the base of its
    example seeds: ``seed``'s, or, without one, drawn afresh for each iterator (the only draw
    from a state: every function after it is stateless, and kept)."""

    def begin(_):
        chosen = progress.start()
        if seed is None:
            base = tf.random.uniform([], maxval=_SEED_BASES, dtype=tf.int64)
        else:
            base = tf.constant(seed & 0x7FFFFFFF, tf.int64)
        with tf.control_dependencies([chosen]):
            return chosen, progress.consumed(), base

    return map_on_cpu(tf.data.Dataset.from_tensors(tf.constant(0, tf.int64)), begin)


#: An unseeded iterator's base is drawn from [0, 2**31), as a seed's is masked.
_SEED_BASES = 2**31


def pass_seed(seed: int | tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """The int64 seed of iteration ``key`` of a pipeline seeded with ``seed`` (in [0, 2**31)),
    or with a base an iterator drew (a tensor)."""
    if isinstance(seed, int):
        seed = tf.constant(seed & 0x7FFFFFFF, tf.int64)
    return place.folded_seed(seed, key)


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
    read: place.Read,
    seed: int | None,
    progress: Progress | None,
    *,
    passes: int | None = 1,
    replayed: str = NO_REPLAY,
) -> tf.data.Dataset:
    """``((position, salt[, replayed]), record)``: the records of one iteration with what each
    record's example seed is folded from (:func:`example_seed`), and with ``FLAG_REPLAYED``
    whether it was delivered before the place the iterator resumes from.

    ``read(seed)`` gives one pass over the records (shuffled as the pipeline asks) for a seed
    (None when the pipeline has none); an iteration reads ``passes`` of them (None: without
    end), each with a seed of its own (:func:`place.seed_of_pass`). Each iterator first takes its
    starting place from ``progress`` (:mod:`object_input.place`), then reads with the shuffles
    and the example seeds keyed by the pipeline seed and its iteration number, from the pass
    its place is in, passing over the records before the place's restart undecoded. Given the
    place, nothing random depends on the process or the parallelism: iteration ``k`` is the
    same in any process.
    """
    if progress is None:
        # tf.data service workers split the work through the sources at the top of the graph
        # (no function may hold them) and hold no variables: tf.data's own generators then key
        # each iteration and pass, anew in every process (and, unseeded, in every iterator).
        salts = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True)
        return _with_positions(read(seed).repeat(passes), 0, salts, None)

    def one_iteration(
        starting_place: tf.Tensor, consumed: tf.Tensor, base: tf.Tensor
    ) -> tf.data.Dataset:
        iteration, restart, seen, delivered = place.unpack(starting_place)
        iteration_seed = pass_seed(base, iteration)
        salts = tf.data.Dataset.from_tensors(iteration_seed).repeat()
        read_seed = _read_seed(seed, iteration)
        unshuffled = read(read_seed, shuffled=False) if passes != 1 else None
        length = place.pass_length_at(unshuffled, restart) if passes != 1 else None

        def records(first: tf.Tensor, flags: tf.Tensor | None = None, count: tf.Tensor = -1):
            # Positions count before a re-shard's consumed records are left out: a place
            # restores onto the same stream.
            positioned = place.stream(read, read_seed, passes, first, length, unshuffled)
            positioned = positioned.take(count)
            return _unconsumed(
                _with_positions(positioned, first, salts, flags), iteration, consumed
            )

        if replayed == FLAG_REPLAYED:
            return records(restart, delivered)
        if replayed == NO_REPLAY:
            return records(restart)
        # The records the buckets held, then, read anew, the rest: a filter on the first
        # alone, so the stream past the place costs no function per record.
        held = records(restart, delivered, seen - restart).filter(
            lambda parts, record: tf.logical_not(parts[2])
        )
        held = map_on_cpu(held, lambda parts, record: (parts[:2], record))
        return held.concatenate(records(seen))

    return stages.flat_map(keys(progress, seed), one_iteration)


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
