"""Where an iterator is in its iteration, in a few integers: exact resume without its buffers.

A ``make_dataset`` iteration is a function of the seed, its iteration number and each record's
position in the iteration's stream (:mod:`object_input.iterations`), so its place needs no
buffered record: it is the int64 vector ``[iteration, restart, seen, words...]``:

- ``seen``: one past the furthest position delivered;
- ``restart``: the position a restored iterator reads again from: everything before it was
  delivered or dropped, and the stages between the reader and the batch (the partner groups of
  combining steps, the aspect-ratio buckets) hold nothing from before it;
- ``words``: which positions of ``[restart, seen)`` were delivered, 63 to a word.

A restored iterator passes over the first ``restart`` records undecoded, drops those of
``[restart, seen)`` already delivered, and runs the rest as the uninterrupted run did: a partner
group re-forms whole (``restart`` is where one begins) and the buckets refill with the examples
they held, in stream order, so the next batches are the same bit for bit. Without combining steps
or aspect-ratio grouping ``restart == seen`` and the place is three integers.

An iteration's passes each read with a seed of their own (:func:`seed_of_pass`), so a restore
starts reading at the pass its place is in (:func:`stream`), having counted the records of a
pass: at most two passes are read again, however deep the place.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.tracing import stages
from object_input.tracing.maps import map_on_cpu

_HEADER = 3  # iteration, restart, seen
#: Where an iteration without end stops numbering its passes.
_ENDLESS = np.iinfo(np.int64).max
#: Seeds of passes are in [0, 2**31 - 1).
_SEEDS = 2**31 - 1
_BITS = 63  # bits per int64 word, the sign bit unused
_PRIVATE = (fields.POSITION, fields.RESTART, fields.START, fields.REPLAYED)


def start(iteration: int | tf.Tensor) -> tf.Tensor:
    """The place at the start of ``iteration``: nothing read yet."""
    iteration = tf.cast(iteration, tf.int64)
    return tf.stack([iteration, tf.constant(0, tf.int64), tf.constant(0, tf.int64)])


def length(restart: int, seen: int) -> int:
    """The length of a place vector whose ``restart`` and ``seen`` are these."""
    return _HEADER + -(-(seen - restart) // _BITS)


def unpack(place: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]:
    """``(iteration, restart, seen, delivered)``: ``delivered`` bool ``[seen - restart]``, one
    per position from ``restart`` on."""
    restart, seen = place[1], place[2]
    return place[0], restart, seen, _unpack_bits(place[_HEADER:], seen - restart)


def advance(place: tf.Tensor, positions: tf.Tensor, restart: tf.Tensor) -> tf.Tensor:
    """``place`` after a batch of the examples at ``positions`` was delivered, after which a
    restored iterator reads again from ``restart``."""
    iteration, old_restart, seen, delivered = unpack(place)
    new_restart = tf.maximum(old_restart, restart)
    new_seen = tf.maximum(seen, tf.reduce_max(positions) + 1)
    kept = tf.concat([old_restart + tf.where(delivered)[:, 0], positions], axis=0)
    kept = tf.boolean_mask(kept, kept >= new_restart) - new_restart
    bits = tf.scatter_nd(kept[:, tf.newaxis], tf.ones_like(kept), [new_seen - new_restart]) > 0
    return tf.concat([tf.stack([iteration, new_restart, new_seen]), _pack_bits(bits)], axis=0)


def _pack_bits(bits: tf.Tensor) -> tf.Tensor:
    padded = tf.pad(tf.cast(bits, tf.int64), [[0, -tf.size(bits) % _BITS]])
    weights = tf.bitwise.left_shift(tf.constant(1, tf.int64), tf.range(_BITS, dtype=tf.int64))
    return tf.reduce_sum(tf.reshape(padded, [-1, _BITS]) * weights, axis=1)


def _unpack_bits(words: tf.Tensor, count: tf.Tensor) -> tf.Tensor:
    shifted = tf.bitwise.right_shift(words[:, tf.newaxis], tf.range(_BITS, dtype=tf.int64))
    return tf.reshape(tf.bitwise.bitwise_and(shifted, 1), [-1])[:count] > 0


def with_restarts(
    dataset: tf.data.Dataset,
    batch_size: int,
    bucket: Callable[[dict], tf.Tensor],
    num_buckets: int,
) -> tf.data.Dataset:
    """Examples about to be batched by bucket (``group_by_window`` with windows of
    ``batch_size``), each with its :data:`fields.RESTART`: the earliest place a held example
    (or its partner group) begins, or its own restart when nothing is held.

    The buckets are counted as ``group_by_window`` fills them, in one sequential scan."""
    empty = tf.int64.max

    @tf.autograph.experimental.do_not_convert
    def step(state, features):
        counts, starts = state
        position = features[fields.POSITION]
        own_start = features.get(fields.START, position)
        own_restart = features.get(fields.RESTART, position + 1)
        mine = tf.one_hot(bucket(features), num_buckets, on_value=True, off_value=False)
        counts = counts + tf.cast(mine, tf.int64)
        starts = tf.where(mine, tf.minimum(starts, own_start), starts)
        full = mine & (counts >= batch_size)
        counts = tf.where(full, tf.constant(0, tf.int64), counts)
        starts = tf.where(full, tf.constant(empty, tf.int64), starts)
        restart = tf.minimum(own_restart, tf.reduce_min(starts))
        return (counts, starts), {**features, fields.RESTART: restart}

    initial = (tf.zeros([num_buckets], tf.int64), tf.fill([num_buckets], tf.constant(empty)))
    return stages.scan(dataset, initial, step)


def track(dataset: tf.data.Dataset, read_start: Callable[[], tf.Tensor]) -> tf.data.Dataset:
    """``(features, place)``: each batch (or example) without the private place fields, with the
    place after it. The first element takes the iteration's starting place from ``read_start``
    (set as the iterator started); one sequential scan follows the stream from there."""

    @tf.autograph.experimental.do_not_convert
    def step(state, features):
        started, place = state
        place = tf.cond(started, lambda: place, read_start)
        positions = tf.reshape(features[fields.POSITION], [-1])
        if fields.RESTART in features:
            last = tf.argmax(positions)
            place = advance(place, positions, tf.reshape(features[fields.RESTART], [-1])[last])
        else:
            # Nothing holds examples back: everything before the furthest position is out.
            seen = tf.reduce_max(positions) + 1
            place = tf.stack([place[0], seen, seen])
        public = {name: value for name, value in features.items() if name not in _PRIVATE}
        return (tf.constant(True), place), (public, place)

    initial = (tf.constant(False), tf.zeros([_HEADER], tf.int64))
    return stages.scan(dataset, initial, step)


def end_marker(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` of ``(payload, place)`` followed by one element with an empty place: it
    tells :func:`record` that the iteration ended. Its payload is zeros of the payload's static
    shapes, so the dataset's element spec stays as it was."""

    def zeros(spec: tf.TensorSpec) -> tf.Tensor:
        shape = [0 if size is None else size for size in spec.shape.as_list()]
        return tf.zeros(shape, spec.dtype)

    # Made when the marker is reached, not held in the graph as constants.
    spec = dataset.element_spec[0]
    marker = map_on_cpu(
        tf.data.Dataset.from_tensors(tf.constant(0)),
        lambda _: (tf.nest.map_structure(zeros, spec), tf.zeros([0], tf.int64)),
    )
    return dataset.concatenate(marker)


def record(dataset: tf.data.Dataset, write: Callable[[tf.Tensor], tf.Operation]) -> tf.data.Dataset:
    """The payloads of ``(payload, place)`` elements, ``write(place)`` run as each is handed to
    the consumer (these maps run in its thread, after the prefetch); the end marker of
    :func:`end_marker` is written (an empty place: the iteration is over), not handed on."""

    @tf.autograph.experimental.do_not_convert
    def written(payload, place):
        with tf.control_dependencies([write(place)]):
            return tf.nest.map_structure(tf.identity, payload), tf.size(place) > 0

    dataset = stages.filter(map_on_cpu(dataset, written), lambda payload, real: real)
    return map_on_cpu(dataset, lambda payload, real: payload)


#: ``read(seed, shuffled=True)``: one pass over a shard's records, in the order ``seed`` gives
#: (None: unseeded); ``shuffled=False`` leaves out the record shuffle (to count them).
Read = Callable[..., tf.data.Dataset]


def stream(
    read: Read,
    seed: tf.Tensor | None,
    passes: int | None,
    position: int | tf.Tensor,
    pass_length: tf.Tensor | None = None,
    unshuffled: tf.data.Dataset | None = None,
) -> tf.data.Dataset:
    """An iteration's records from ``position`` on: ``passes`` passes of ``read`` (None: without
    end), each with its own seed (:func:`seed_of_pass`), starting at the pass ``position`` is
    in. ``pass_length`` is what :func:`pass_length_at` says of ``position``, ``unshuffled``
    ``read(seed, shuffled=False)`` (None: found here)."""
    if passes == 1:
        return read(seed).skip(position)
    if unshuffled is None:
        unshuffled = read(seed, shuffled=False)
    if pass_length is None:
        pass_length = pass_length_at(unshuffled, position)
    position = tf.cast(position, tf.int64)
    pass_length = tf.cast(pass_length, tf.int64)
    first = tf.where(pass_length > 0, position // tf.maximum(pass_length, 1), 0)
    if passes is None:
        # The passes after the first are numbered once it is read (a dataset's iterator is
        # made when the stream reaches it), so that reading stops there when a pass holds
        # nothing (an empty source would be read pass after pass forever) and what tells it
        # costs nothing before the first batch.
        later = tf.data.Dataset.from_tensors(first + 1).flat_map(
            _plain(lambda start: tf.data.Dataset.range(start, _end(unshuffled, start)))
        )
        numbers = tf.data.Dataset.range(first, first + 1).concatenate(later)
    else:
        numbers = tf.data.Dataset.range(first, passes)
    records = numbers.flat_map(_plain(lambda number: read(seed_of_pass(seed, number))))
    return records.skip(position - first * pass_length)


def _end(unshuffled: tf.data.Dataset, start: tf.Tensor) -> tf.Tensor:
    """Where an endless iteration's pass numbers from ``start`` end: never, unless a pass
    holds nothing (only whether there is a record is read: what cannot be read raises in the
    pass itself)."""
    holds = count(unshuffled.ignore_errors().take(1)) > 0
    return tf.where(holds, tf.constant(_ENDLESS, tf.int64), start)


def seed_of_pass(seed: tf.Tensor | None, number: tf.Tensor) -> tf.Tensor | None:
    """The seed pass ``number`` of an iteration read with ``seed`` reads with: ``seed`` in pass
    0, one folded from it and the pass number after (None: unseeded)."""
    if seed is None:
        return None
    seed = tf.cast(seed, tf.int64)
    number = tf.cast(number, tf.int64)
    return tf.where(number == 0, seed, folded_seed(seed, number))


def folded_seed(seed: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """An int64 seed in [0, 2**31 - 1) drawn statelessly from the int64 ``seed`` and ``key``."""
    pair = tf.stack([tf.cast(seed, tf.int64), tf.cast(key, tf.int64)])
    return tf.random.stateless_uniform([], pair, minval=0, maxval=_SEEDS, dtype=tf.int64)


def pass_length_at(unshuffled: tf.data.Dataset, position: int | tf.Tensor) -> tf.Tensor:
    """The records in a pass when ``position`` lies past the first (a restore reads from its
    pass on), else 0: ``unshuffled``, a pass read without the record shuffle, read up to the
    position."""
    position = tf.cast(position, tf.int64)

    def counted() -> tf.Tensor:
        read_up_to = count(unshuffled.take(position + 1))
        return tf.where(read_up_to > position, tf.constant(0, tf.int64), read_up_to)

    return tf.cond(position > 0, counted, lambda: tf.constant(0, tf.int64))


def count(records: tf.data.Dataset) -> tf.Tensor:
    """The number of elements of ``records`` (int64), read through."""
    return records.reduce(tf.constant(0, tf.int64), _plain(lambda total, _: total + 1))


def _plain(fn: Callable) -> Callable:
    """``fn``, traced as written: AutoGraph has nothing to convert in it."""
    return tf.autograph.experimental.do_not_convert(fn)
