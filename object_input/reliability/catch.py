"""Catching op errors of the per-example map, so that a failure is named or counted, not fatal.

A TensorFlow op failing inside ``dataset.map`` (bytes no decoder can read, a failed assertion in a
step) would end the stream. :func:`catch_errors` and :func:`catch_marked` map around it and say
whose record failed; :func:`raise_caught` and :func:`count_caught` then raise or count every
failure, flagged ones included, in stream order.
:class:`object_input.reliability.error_policy.ErrorPolicy` picks and composes them; the counts are
kept in :mod:`object_input.reliability.skips`.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.reliability import errors
from object_input.reliability.skips import SkipCounter
from object_input.tracing import stages
from object_input.tracing.maps import map_on_cpu

#: Records per window of :func:`catch_errors`: its fixed cost per window is spread over them,
#: and it holds up to about four windows of mapped examples (docs/performance.md).
CATCH_WINDOW = 16
#: Records between the markers of :func:`catch_marked`, and the record ids each element carries
#: of the records before it: every failure is named by id.
CATCH_HISTORY = 32


def catch_errors(
    dataset: tf.data.Dataset,
    fn: Any,
    *,
    record_id: Any,
    num_parallel_calls: int,
    window: int = CATCH_WINDOW,
) -> tf.data.Dataset:
    """``dataset.map(fn)`` that survives an op error inside ``fn`` and says whose it was.

    ``fn`` returns a feature dict; ``record_id`` picks an element's record id (a string scalar)
    out of the element's structure (``lambda seed, record: record[0]``), and is applied to the
    windows' matching structure of datasets too. An op error inside ``fn`` (bytes no decoder
    can read, a failed assertion in a step) would end the stream; here that element is left
    out and its record id handed on. Elements come out in order as ``(failed, end,
    features)``: ``failed`` the string vector of the record ids whose ``fn`` failed just before
    this element, ``end`` True for a marker with placeholder ``features`` that closes each
    window of ``window`` records and, last, the stream (it carries the trailing failures).
    :func:`raise_caught` and :func:`count_caught` turn them back into feature dicts, raising or
    counting the failures in stream order.

    The records go in windows, each mapped as its own small dataset under ``ignore_errors``
    (``num_parallel_calls`` at a time), while the next window is mapped ahead. Only ``fn`` is
    covered: the windows are filled in the outer dataset, so an error while reading records (a
    damaged file, a failed read) still ends the stream and is never swallowed. The markers are
    interleaved into the stream before the windows and pass through the same map (``fn`` is not
    run on them), so each window is one map of a zip: no function per window but the map's.
    Where nothing upstream of ``fn`` can raise, :func:`catch_marked` does the same with one map.
    """
    block = window + 1  # the window's records and its end marker
    records, marker = _with_end_flags(dataset)
    stream = _every(records, marker, window)
    attempt = _attempt(fn)

    @tf.autograph.experimental.do_not_convert
    def attempt_at(index: tf.Tensor, ids: tf.Tensor, element: Any, end: tf.Tensor) -> tuple:
        return index, ids, end, attempt(element, ~end, {})

    def one(element: Any, end: tf.data.Dataset) -> tf.data.Dataset:
        # Every element carries its window's record ids: a survivor names the failures before it
        # by its position in the window.
        ids = record_id(*element).batch(block).repeat()
        positions = tf.data.Dataset.range(block)
        return map_on_cpu(
            tf.data.Dataset.zip((positions, ids, element, end)),
            attempt_at,
            num_parallel_calls=num_parallel_calls,
            deterministic=True,
        ).ignore_errors(log_warning=True)

    @tf.autograph.experimental.do_not_convert
    def step(expected: tf.Tensor, item: tuple) -> tuple:
        position, ids, end, features = item
        after = tf.where(end, tf.constant(0, tf.int64), position + 1)
        return after, (ids[expected:position], end, features)

    # One window at a time, the next one mapped ahead: windows mapped side by side would each
    # buffer two windows of examples (gigabytes with 16 cores and large images).
    mapped = stream.window(block).interleave(
        one, cycle_length=1, block_length=block, num_parallel_calls=1
    )
    return stages.scan(mapped, tf.constant(0, tf.int64), step)


def catch_marked(
    dataset: tf.data.Dataset,
    fn: Any,
    *,
    record_id: Any,
    mark: Any,
    num_parallel_calls: int,
    history: int = CATCH_HISTORY,
) -> tf.data.Dataset:
    """:func:`catch_errors` for a ``dataset`` that never raises: one map under ``ignore_errors``.

    ``ignore_errors`` over the whole map would also swallow an error raised upstream of it, so
    ``dataset`` must report what it could not read as *marked* elements instead of raising (a
    source's ``records`` under ``ReadContext(marks=True)``): ``mark`` picks an element's
    ``(error, detail)``, an error code of :mod:`object_input.reliability.errors` (``OK`` for a
    record) and its message. ``fn`` maps the records (its features must have the fields
    ``fields.ERROR``, ``ERROR_DETAIL`` and ``RECORD_ID``); a marked element passes without it, as
    placeholder features flagged with its code, message and record id in those fields, so
    :func:`raise_caught` and :func:`count_caught` raise or count it in stream order.

    The elements out are :func:`catch_errors`'s: an end marker follows every ``history``
    records and, last, the stream, so failures are reported even when no record after them
    survives (an endless stream of records that all fail raises at the first marker). Each
    element carries the ids of the ``history`` records before it (a scan ahead of the map): a
    survivor or marker names the failures since the previous one. There are no windows, so no
    dataset, iterator or thread per window of records: the first batch comes up to 0.8 CPU s
    sooner (docs/performance.md, "Prefer sources that mark what they cannot read").
    """
    records, marker = _with_end_flags(dataset)
    stream = _every(records, marker, history)

    @tf.autograph.experimental.do_not_convert
    def number(state: tuple, item: tuple) -> tuple:
        # A marker takes no position: it reports the records before it.
        position, previous = state
        element, end = item
        ids = tf.concat([previous[1:], tf.reshape(record_id(*element), [1])], 0)
        after = tf.where(end, previous, ids)
        return (position + tf.cast(~end, tf.int64), after), (position, previous, element, end)

    start = (tf.constant(0, tf.int64), tf.fill([history], ""))
    attempt = _attempt(fn)

    @tf.autograph.experimental.do_not_convert
    def attempt_at(position: tf.Tensor, previous: tf.Tensor, element: Any, end: tf.Tensor):
        error, detail = mark(*element)
        # The end marker's placeholder element may look marked: it is not.
        error = tf.where(end, errors.OK, tf.cast(error, tf.int32))
        flags = {fields.ERROR: error, fields.ERROR_DETAIL: tf.where(end, "", detail)}
        flags[fields.RECORD_ID] = record_id(*element)
        run = ~end & tf.equal(error, errors.OK)
        return position, previous, end, attempt(element, run, flags)

    @tf.autograph.experimental.do_not_convert
    def step(expected: tf.Tensor, item: tuple) -> tuple:
        position, previous, end, features = item
        # At most ``history`` records since the previous survivor or marker: all named.
        failed = previous[history - (position - expected) :]
        return position + tf.cast(~end, tf.int64), (failed, end, features)

    mapped = map_on_cpu(
        stages.scan(stream, start, number),
        attempt_at,
        num_parallel_calls=num_parallel_calls,
        deterministic=True,
    ).ignore_errors(log_warning=True)
    return stages.scan(mapped, tf.constant(0, tf.int64), step)


def _every(records: tf.data.Dataset, marker: tf.data.Dataset, window: int) -> tf.data.Dataset:
    """``window`` records, then a marker, until the records end; then the stream's own marker."""
    choice = tf.data.Dataset.from_tensor_slices(tf.constant([0] * window + [1], tf.int64))
    return tf.data.Dataset.choose_from_datasets(
        [records, marker.repeat()], choice.repeat(), stop_on_empty_dataset=True
    ).concatenate(marker)


def _with_end_flags(dataset: tf.data.Dataset) -> tuple[tf.data.Dataset, tf.data.Dataset]:
    """A catch's stream parts: ``(element, False)`` for each element of ``dataset``, and one
    ``(placeholder element, True)``, the end marker."""
    records = tf.data.Dataset.zip((dataset, tf.data.Dataset.from_tensors(False).repeat()))
    marker_input = tf.nest.map_structure(_one_zero, dataset.element_spec)
    marker = tf.data.Dataset.zip(
        (tf.data.Dataset.from_tensor_slices(marker_input), tf.data.Dataset.from_tensors(True))
    )
    return records, marker


def _attempt(fn: Any) -> Any:
    """``attempt(element, run, flags)``: ``fn(*element)`` where ``run``, else placeholder
    features of ``fn``'s spec with ``flags`` (a dict of some of its fields) set."""
    output_spec = {}

    @tf.autograph.experimental.do_not_convert
    def attempt(element: Any, run: tf.Tensor, flags: dict) -> dict:
        def mapped() -> dict:
            features = fn(*element)
            output_spec.update({k: tf.TensorSpec(v.shape, v.dtype) for k, v in features.items()})
            return features

        # tf.cond traces the first branch first: the placeholder then knows the spec.
        return tf.cond(run, mapped, lambda: errors.placeholder(output_spec, **flags))

    return attempt


def _one_zero(spec: tf.TypeSpec) -> Any:
    """A batch of one placeholder of ``spec`` (dense, ragged or sparse): zeros, unknown
    dimensions 0. Sliced by ``from_tensor_slices``, its element has ``spec``'s type, which
    for a ragged ``spec`` of ragged rank 0 (a row sliced from a ragged batch) no value has."""
    shape = [1] + [0 if d is None else d for d in spec.shape.as_list()]
    if isinstance(spec, tf.TensorSpec):
        return tf.zeros(shape, spec.dtype)
    if isinstance(spec, tf.RaggedTensorSpec):
        return tf.RaggedTensor.from_tensor(
            tf.zeros(shape, spec.dtype),
            ragged_rank=spec.ragged_rank + 1,
            row_splits_dtype=spec.row_splits_dtype,
        )
    if isinstance(spec, tf.SparseTensorSpec):
        return tf.sparse.from_dense(tf.zeros(shape, spec.dtype))
    raise TypeError(f"records of tensors, ragged or sparse tensors can be caught, got {spec}")


def _raise_failed(failed: tf.Tensor) -> tf.Tensor:
    """An assertion that the string vector ``failed`` of record ids is empty, naming them."""

    def fail() -> tf.Tensor:
        message = tf.strings.join(
            [
                tf.where(tf.size(failed) > 1, "records ", "record "),
                tf.strings.reduce_join(failed, separator=", "),
                f": undecodable: {errors.REASONS['undecodable']}. TensorFlow logged its own "
                "error for it just above, as a warning of tf.data ignore_errors (hidden by "
                "TF_CPP_MIN_LOG_LEVEL=2 or more; object-input commands show it with --verbose)",
            ]
        )
        with tf.control_dependencies([tf.debugging.Assert(False, [message])]):
            return tf.constant(False)

    return tf.cond(tf.equal(tf.size(failed), 0), lambda: tf.constant(True), fail)


def _features(flags: tuple[str, ...]) -> Any:
    """A map function from ``(failed, end, features)`` to the features without ``flags``."""
    return lambda failed, end, features: {k: v for k, v in features.items() if k not in flags}


def raise_caught(dataset: tf.data.Dataset, allowed: tuple[str, ...] = ()) -> tf.data.Dataset:
    """Feature dicts from :func:`catch_errors`'s elements under ``on_error="raise"``.

    Records whose map failed raise an error naming them (all those before the next example
    that did not fail: that example goes with the error); then a flagged record
    (``fields.ERROR``) raises its own message unless its reason is in ``allowed``. So every
    failure is raised in stream order. Without ``allowed`` the flag fields go; the window end
    markers go. No variables: this runs on tf.data service workers too.
    """

    @tf.autograph.experimental.do_not_convert
    def keep(failed: tf.Tensor, end: tf.Tensor, features: dict) -> tf.Tensor:
        checks = [_raise_failed(failed)]
        if fields.ERROR in features:
            with tf.control_dependencies(checks):
                checks = [errors.flagged_check(features, allowed)]
        with tf.control_dependencies(checks):
            return tf.identity(~end)

    flags = () if allowed else (fields.ERROR, fields.ERROR_DETAIL)
    return map_on_cpu(stages.filter(dataset, keep), _features(flags))


def count_caught(dataset: tf.data.Dataset, counter: SkipCounter) -> tf.data.Dataset:
    """Feature dicts from :func:`catch_errors`'s elements under ``on_error="skip"``.

    Each record whose map failed is counted as ``undecodable`` with its id, then each example
    by its ``fields.ERROR`` code with its dropped boxes; the flagged ones, the flag fields and
    the window end markers go. One sequential filter, one element at a time, so the first
    offenders are the first in the stream.
    """
    undecodable = errors.code("undecodable")

    @tf.autograph.experimental.do_not_convert
    def keep(failed: tf.Tensor, end: tf.Tensor, features: dict) -> tf.Tensor:
        counted = tf.foldl(
            lambda done, record: counter.count(undecodable, record, count_passed=False) | done,
            failed,
            initializer=tf.constant(True),
        )
        with tf.control_dependencies([counted]):
            return tf.cond(end, lambda: tf.constant(False), lambda: counter.count_example(features))

    return map_on_cpu(stages.filter(dataset, keep), _features((fields.ERROR, fields.ERROR_DETAIL)))
