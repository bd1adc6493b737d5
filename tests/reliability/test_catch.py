"""catch.catch_errors, catch_marked, raise_caught and count_caught: a map that survives op
errors, names the failed records in stream order and raises or counts them, whatever the window,
history and parallelism."""

import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from object_input import fields
from object_input.reliability import catch, errors, skips


def _records(size: int) -> tf.data.Dataset:
    return tf.data.Dataset.range(size).map(lambda i: (tf.strings.as_string(i), i))


def _failing_map(failing: set[int]):
    bad = tf.constant(sorted(failing) or [-1], tf.int64)

    def fn(record_id, value):
        check = tf.debugging.Assert(~tf.reduce_any(tf.equal(value, bad)), ["op error", value])
        with tf.control_dependencies([check]):
            return {
                "value": tf.identity(value),
                fields.RECORD_ID: record_id,
                fields.ERROR: tf.constant(errors.OK, tf.int32),
                fields.ERROR_DETAIL: tf.constant(""),
            }

    return fn


def _catch(catch, size, failing, calls, **options):
    """``catch`` (a function of object_input.reliability.catch) over records ``0..size-1``, the
    ``failing`` ones failing."""
    return catch(
        _records(size),
        _failing_map(failing),
        record_id=lambda record_id, value: record_id,
        num_parallel_calls=calls,
        **options,
    )


def _caught(size, failing, window, calls):
    return _catch(catch.catch_errors, size, failing, calls, window=window)


@given(
    size=st.integers(0, 13),
    failing=st.sets(st.integers(0, 12)),
    window=st.integers(1, 5),
    calls=st.sampled_from([1, 2, tf.data.AUTOTUNE]),
)
def test_catch_errors_is_the_map_with_each_failure_named_before_its_successor(
    size, failing, window, calls
):
    failing = {f for f in failing if f < size}
    elements = [
        ([f.decode() for f in failed.numpy()], bool(end), int(features["value"]))
        for failed, end, features in _caught(size, failing, window, calls)
    ]
    # Each full window of records gives its survivors, then an end marker; the records after the
    # last full window give theirs, then the stream's end marker. Every survivor and end marker
    # carries the failures since the window's previous element.
    expected = []
    for start in range(0, size + 1, window):
        failed = []
        for value in range(start, min(start + window, size)):
            if value in failing:
                failed.append(str(value))
            else:
                expected.append((failed, False, value))
                failed = []
        expected.append((failed, True, 0))
    assert elements == expected


def _marked(size, failing, marked, history, calls):
    """Records ``0..size-1``; ``failing`` fail in the map, ``marked`` are read failures."""
    bad = tf.constant(sorted(marked) or [-1], tf.int64)

    def mark(record_id, value):
        hit = tf.reduce_any(tf.equal(value, bad))
        error = tf.where(hit, errors.code("unreadable_file"), errors.OK)
        return error, tf.where(hit, tf.strings.join(["cannot read ", record_id]), "")

    return _catch(catch.catch_marked, size, failing, calls, mark=mark, history=history)


@given(
    size=st.integers(0, 13),
    failing=st.sets(st.integers(0, 12)),
    marked=st.sets(st.integers(0, 12)),
    history=st.integers(1, 5),
    calls=st.sampled_from([1, 2, tf.data.AUTOTUNE]),
)
def test_catch_marked_is_the_map_with_failures_named_and_marks_flagged(
    size, failing, marked, history, calls
):
    marked = {m for m in marked if m < size}
    failing = {f for f in failing if f < size} - marked
    elements = [
        (
            [f.decode() for f in failed.numpy()],
            bool(end),
            int(features["value"]),
            int(features[fields.ERROR]),
            features[fields.ERROR_DETAIL].numpy().decode(),
            features[fields.RECORD_ID].numpy().decode(),
        )
        for failed, end, features in _marked(size, failing, marked, history, calls)
    ]
    # Each full ``history`` of records gives its survivors and marks, then an end marker; the
    # records after the last full one give theirs, then the stream's end marker. Each element
    # carries, by id, the failures since the element before it.
    expected = []
    unreadable = errors.code("unreadable_file")
    for start in range(0, size + 1, history):
        failed = []
        for value in range(start, min(start + history, size)):
            if value in failing:
                failed.append(str(value))
                continue
            if value in marked:
                expected.append((failed, False, 0, unreadable, f"cannot read {value}", str(value)))
            else:
                expected.append((failed, False, value, 0, "", str(value)))
            failed = []
        expected.append((failed, True, 0, 0, "", ""))
    assert elements == expected


def test_marks_are_raised_or_counted_in_stream_order_like_flagged_records():
    iterator = iter(catch.raise_caught(_marked(6, {4}, {2}, 4, 2)))
    assert [int(next(iterator)["value"]) for _ in range(2)] == [0, 1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="cannot read 2"):
        next(iterator)
    assert int(next(iterator)["value"]) == 3
    # A survivor after a failure goes with the failure's error.
    with pytest.raises(tf.errors.InvalidArgumentError, match="record 4: undecodable: "):
        next(iterator)
    assert list(iterator) == []
    counter = skips.SkipCounter()
    dataset = catch.count_caught(_marked(8, {1, 6}, {2, 5}, 4, 2), counter)
    assert [int(f["value"]) for f in dataset] == [0, 3, 4, 7]
    snapshot = counter.snapshot()
    assert snapshot.passed == 4
    assert snapshot.skipped == {"undecodable": 2, "unreadable_file": 2}
    assert [o.split(": ")[:2] for o in snapshot.offenders] == [
        ["1", "undecodable"],
        ["2", "unreadable_file"],
        ["5", "unreadable_file"],
        ["6", "undecodable"],
    ]
    assert snapshot.offenders[1].endswith("; cannot read 2")


@pytest.mark.parametrize("history", [1, 3])
def test_a_stream_of_failing_records_raises_at_its_first_marker_not_its_end(history):
    # Nothing survives: the marker after ``history`` records carries their failures. (Bounded,
    # so that a catch without markers ends, at the stream's end, naming other records.)
    records = _records(1).repeat(1000)
    caught = catch.catch_marked(
        records,
        _failing_map({0}),
        record_id=lambda record_id, value: record_id,
        mark=lambda *_: (tf.constant(errors.OK), tf.constant("")),
        num_parallel_calls=2,
        history=history,
    )
    expected = ", ".join(["0"] * history)
    with pytest.raises(tf.errors.InvalidArgumentError, match=f"records? {expected}: undecodable"):
        next(iter(catch.raise_caught(caught)))


def test_count_caught_counts_failures_and_drops_in_stream_order():
    counter = skips.SkipCounter()
    dataset = catch.count_caught(_caught(11, {0, 4, 5, 10}, 3, 2), counter)
    assert [int(f["value"]) for f in dataset] == [1, 2, 3, 6, 7, 8, 9]
    snapshot = counter.snapshot()
    assert snapshot.passed == 7 and snapshot.skipped == {"undecodable": 4}
    assert [o.split(":")[0] for o in snapshot.offenders] == ["0", "4", "5", "10"]


@pytest.mark.parametrize("inside", [False, True])
def test_raise_caught_raises_failures_then_flags_in_stream_order(inside):
    def flag(features):
        bad = tf.equal(features["value"], 3)
        return {
            **features,
            fields.ERROR: tf.where(bad, errors.code("box_order"), errors.OK),
            fields.ERROR_DETAIL: tf.where(bad, "record 3: flagged", ""),
        }

    # Windows [0, 1, 2] and [3, 4, 5]: record 2 fails, record 3 is flagged.
    if inside:  # flagged inside the caught map, as make_dataset does
        caught = catch.catch_errors(
            _records(6),
            lambda record_id, value: flag(_failing_map({2})(record_id, value)),
            record_id=lambda record_id, value: record_id,
            num_parallel_calls=2,
            window=3,
        )
    else:
        caught = _caught(6, {2}, 3, 2).map(lambda failed, end, f: (failed, end, flag(f)))
    dataset = catch.raise_caught(caught)
    iterator = iter(dataset)
    assert [int(next(iterator)["value"]) for _ in range(2)] == [0, 1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="record 2: undecodable: "):
        next(iterator)
    with pytest.raises(tf.errors.InvalidArgumentError, match="record 3: flagged"):
        next(iterator)
    assert [int(f["value"]) for f in iterator] == [4, 5]


def test_records_of_ragged_and_sparse_tensors_are_caught_too():
    ragged = tf.ragged.constant([[1, 2], [3], [4, 5, 6]], tf.int64)
    records = tf.data.Dataset.zip(
        (
            tf.data.Dataset.range(3).map(tf.strings.as_string),
            tf.data.Dataset.from_tensor_slices(ragged),
            tf.data.Dataset.from_tensor_slices(tf.sparse.from_dense(ragged.to_tensor())),
        )
    )

    def fn(record_id, values, sparse):
        check = tf.debugging.Assert(tf.size(values) != 1, ["op error"])
        with tf.control_dependencies([check]):
            return {
                "total": tf.reduce_sum(values) + tf.reduce_sum(sparse.values),
                fields.RECORD_ID: record_id,
            }

    caught = catch.catch_errors(
        records, fn, record_id=lambda record_id, *_: record_id, num_parallel_calls=2, window=2
    )
    elements = [([f.decode() for f in a.numpy()], bool(b), int(c["total"])) for a, b, c in caught]
    assert elements == [([], False, 6), (["1"], True, 0), ([], False, 30), ([], True, 0)]
    marked = catch.catch_marked(
        records,
        lambda *record: {
            **fn(*record),
            fields.ERROR: tf.constant(errors.OK),
            fields.ERROR_DETAIL: tf.constant(""),
        },
        record_id=lambda record_id, *_: record_id,
        mark=lambda *_: (tf.constant(errors.OK), tf.constant("")),
        num_parallel_calls=2,
    )
    elements = [([f.decode() for f in a.numpy()], bool(b), int(c["total"])) for a, b, c in marked]
    assert elements == [([], False, 6), (["1"], False, 30), ([], True, 0)]
