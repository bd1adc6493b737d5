"""TensorFlow op errors (no check flags the record): raised naming the records in stream order
or skipped alone, invisible on clean data, settled before mosaic partners, kept across an
iterator checkpoint, and never looping forever."""

import itertools
import logging
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from bad_records import (
    IMAGE,
    bad_record,
    good_example,
    small_dataset,
    source_ids,
    truncated_jpeg,
    with_values,
    write_records,
)

from object_input import fields
from object_input.reliability import skips
from object_input.reliability.skips import stats
from object_input.writers import build_example, encode_image

HANG_CHECK = """
import sys
import object_input as oi
import tensorflow as tf
dataset = oi.make_dataset(sys.argv[1], num_epochs=None, batch_size=None, shuffle=False)
try:
    next(iter(dataset))
except tf.errors.InvalidArgumentError as error:
    print("raised:", error.message)
"""


@pytest.mark.slow
def test_repeating_records_that_all_fail_raise_instead_of_looping_forever(tmp_path):
    # A truncated JPEG fails in the map (an op error, not a flag) and no record ever survives:
    # the catch must still report it. A subprocess, so that a regression fails, not hangs.
    path = write_records(tmp_path / "bad.tfrecord", [bad_record(image__encoded=truncated_jpeg())])
    run = subprocess.run(
        [sys.executable, "-c", HANG_CHECK, path],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert "raised:" in run.stdout, run.stderr[-2000:]
    assert f"{path}:0: undecodable" in run.stdout


def _png_garbage() -> bytes:
    return encode_image(IMAGE)[:16] + b"not the rest of a PNG" * 4


# Records a TensorFlow op fails on (no check flags them), by position in a file of 37 records:
# two in a row, twice (15 and 16 straddled a window of the catch TFRecord sources had before
# catch.catch_marked), and the very last record.
TF_ERRORS = {
    3: truncated_jpeg(),
    4: b"\xff\xd8\xff\xe0" + b"bytes that are not an image" * 3,
    15: truncated_jpeg(),
    16: _png_garbage(),
    36: b"\xff\xd8\xff\xe0 not a JPEG either",
}


def _tf_error_file(tmp_path) -> tuple[str, list[str]]:
    """A file of 37 records with the TF_ERRORS images; the source ids of the good ones."""
    records, good = [], []
    for index in range(37):
        example = good_example(index)
        if index in TF_ERRORS:
            records.append(with_values(example, image__encoded=TF_ERRORS[index]))
        else:
            records.append(example.SerializeToString())
            good.append(f"good-{index}")
    return write_records(tmp_path / "tf_errors.tfrecord", records), good


def test_tensorflow_op_errors_raise_naming_the_record_in_stream_order(tmp_path):
    path, good = _tf_error_file(tmp_path)
    iterator = iter(small_dataset(path, batch_size=1))
    seen, failed = [], []
    while True:
        try:
            seen.append(next(iterator)[fields.SOURCE_ID].numpy()[0].decode())
        except tf.errors.InvalidArgumentError as err:
            failed.append(re.search(r"records? (.+?): undecodable: ", str(err)).group(1))
        except StopIteration:
            break
    # Failures in a row raise together, on the next good example, which goes with the error
    # (under "raise" the stream ends at the first error anyway).
    assert failed == [f"{path}:3, {path}:4", f"{path}:15, {path}:16", f"{path}:36"]
    assert seen == [i for i in good if i not in ("good-5", "good-17")]


@pytest.mark.parametrize("calls", [1, 3])
def test_tensorflow_op_errors_skip_the_record_alone(tmp_path, calls, caplog):
    path, good = _tf_error_file(tmp_path)
    dataset = small_dataset(path, on_error="skip", num_parallel_calls=calls)
    assert source_ids(dataset) == [good[i : i + 4] for i in range(0, len(good), 4)]
    with caplog.at_level(logging.WARNING, logger="object_input"):
        summary = stats(dataset)
    assert summary.passed == len(good) and summary.skipped == {"undecodable": len(TF_ERRORS)}
    where = [f"{path}:{index}" for index in TF_ERRORS]
    assert [o.split(": ")[0] for o in summary.offenders] == where
    assert re.findall(r"skipped record (\S+): undecodable", caplog.text) == where


@pytest.mark.slow
def test_clean_data_gives_the_same_batches_under_either_policy_whatever_the_parallelism(
    tmp_path,
):
    rng = np.random.default_rng(3)
    records = [
        build_example(
            rng.integers(0, 255, (12, 16, 3), np.uint8),
            boxes=[[0.1, 0.2, 0.7, 0.9]],
            classes=[1],
            source_id=str(i),
        ).SerializeToString()
        for i in range(21)
    ]
    path = write_records(tmp_path / "clean.tfrecord", records)
    options = {
        "seed": 5,
        "shuffle": True,
        "shuffle_buffer_size": 8,
        "augment": ["random_horizontal_flip", "random_crop_image", "random_adjust_brightness"],
        "image_size": (8, 8),
        "batch_size": 3,
    }

    def batches(on_error, calls):
        dataset = small_dataset(path, on_error=on_error, num_parallel_calls=calls, **options)
        return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]

    # The catch is invisible on clean data: "skip" and "raise", one thread or many, give the
    # batches of one thread under "raise", every record once.
    expected = batches("raise", 1)
    ids = sorted(int(i) for batch in expected for i in batch[fields.SOURCE_ID])
    assert ids == list(range(21))
    for on_error, calls in [
        ("skip", 1),
        *itertools.product(["raise", "skip"], [2, tf.data.AUTOTUNE]),
    ]:
        for got, want in zip(batches(on_error, calls), expected, strict=True):
            assert got.keys() == want.keys()
            for key in want:
                np.testing.assert_array_equal(
                    got[key], want[key], err_msg=f"{key}, {on_error}, {calls}"
                )


def _wait_until_idle(counts) -> None:
    """Until the pipeline's threads stop counting (its buffers are full): the counts saved next
    to the iterator then match its state (docs/reliability.md, what the checkpoint holds)."""
    previous = None
    while counts.snapshot() != previous:
        previous = counts.snapshot()
        time.sleep(0.3)


def test_iterator_checkpoints_mid_window_with_caught_errors(tmp_path):
    path, good = _tf_error_file(tmp_path)

    def make():
        dataset = small_dataset(path, on_error="skip", seed=2, shuffle=True, shuffle_buffer_size=6)
        iterator = iter(dataset)
        counts = skips.counter_of(dataset)
        return iterator, counts, tf.train.Checkpoint(iterator=iterator, counts=counts)

    iterator, counts, checkpoint = make()
    before = source_ids([next(iterator) for _ in range(3)])
    _wait_until_idle(counts)
    saved = checkpoint.save(str(tmp_path / "ckpt"))
    rest = source_ids(iterator)
    iterator, restored_counts, checkpoint = make()
    checkpoint.restore(saved).assert_consumed()
    assert source_ids(iterator) == rest
    assert sorted(i for batch in before + rest for i in batch) == sorted(good)
    assert restored_counts.snapshot() == counts.snapshot()
    assert counts.snapshot().skipped == {"undecodable": len(TF_ERRORS)}


@pytest.mark.parametrize("on_error", ["raise", pytest.param("skip", marks=pytest.mark.slow)])
def test_tensorflow_op_errors_are_settled_before_records_become_mosaic_partners(tmp_path, on_error):
    path, good = _tf_error_file(tmp_path)
    dataset = small_dataset(
        path, on_error=on_error, seed=1, augment=["mosaic"], image_size=(16, 16)
    )
    if on_error == "raise":
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"records {path}:3, {path}:4: "):
            source_ids(dataset)
        return
    assert [i for batch in source_ids(dataset) for i in batch] == good
    assert stats(dataset).skipped == {"undecodable": len(TF_ERRORS)}
