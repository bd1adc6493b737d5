"""Steps and batching under on_error: a step's own check raises or skips the record alone;
boxes dropped by a step or by max_boxes are counted."""

import numpy as np
import pytest
import tensorflow as tf
from bad_records import (
    bad_record,
    records_with_bad,
    small_dataset,
    write_records,
)

import object_input as oi
from object_input import fields
from object_input.ops import _core as core
from object_input.reliability.skips import stats
from object_input.writers import build_example


def test_dropped_boxes_are_counted_and_reachable_with_keras(tmp_path):
    crowded = bad_record(
        image__object__bbox__ymin=[0.1] * 3,
        image__object__bbox__xmin=[0.1] * 3,
        image__object__bbox__ymax=[0.5] * 3,
        image__object__bbox__xmax=[0.5] * 3,
        image__object__class__label=[1] * 3,
    )
    path = write_records(tmp_path / "k.tfrecord", records_with_bad(crowded, count=2, at=1))
    dataset = small_dataset(path, max_boxes=1, box_overflow="truncate", keras=True)
    images, targets = next(iter(dataset))
    assert images.shape[0] == 3 and targets["boxes"].shape == (3, 1, 4)
    summary = oi.stats(dataset)
    assert summary.dropped_boxes == 2 and summary.passed == 3 and not summary.skipped
    assert "3 records used, 0 skipped, 2 boxes dropped" in summary.format()


def test_mask_boxes_counts_what_it_removes():
    features = {
        fields.BOXES: tf.constant([[0.0, 0.0, 0.5, 0.5], [0.1, 0.1, 0.2, 0.2]]),
        fields.CLASSES: tf.constant([1, 2]),
        fields.NUM_DROPPED_BOXES: tf.constant(3),
    }
    out = core.mask_boxes(features, tf.constant([False, True]))
    assert out[fields.CLASSES].numpy().tolist() == [2] and int(out[fields.NUM_DROPPED_BOXES]) == 4


def _step_input_file(tmp_path) -> str:
    """Records 0..4, record 2 with an image smaller than caffe_transform's crop."""
    small = build_example(
        np.full((4, 6, 3), 9, np.uint8), boxes=[[0.1, 0.1, 0.5, 0.5]], classes=[1]
    )
    records = records_with_bad(small.SerializeToString(), count=4, at=2)
    return write_records(tmp_path / "steps.tfrecord", records)


def test_a_step_check_raises_its_own_message_naming_the_record(tmp_path):
    path = _step_input_file(tmp_path)
    dataset = small_dataset(path, augment=[("caffe_transform", {"crop_size": 8})], batch_size=1)
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        list(dataset)
    message = str(raised.value)
    assert (
        f"record {path}:2: caffe_transform: the image of size [4 6] is smaller than crop_size 8"
        in message
    )


@pytest.mark.slow
def test_a_step_check_skips_the_record_alone_by_its_reason(tmp_path):
    path = _step_input_file(tmp_path)
    dataset = small_dataset(
        path, augment=[("caffe_transform", {"crop_size": 8})], on_error="skip", batch_size=5
    )
    (batch,) = list(dataset)
    assert [s.decode() for s in batch[fields.SOURCE_ID].numpy()] == [
        "good-0",
        "good-1",
        "good-2",
        "good-3",
    ]
    summary = stats(dataset)
    assert summary.skipped == {"step_input": 1}
    assert summary.offenders[0].startswith(f"{path}:2: step_input: ")
    assert "smaller than crop_size 8" in summary.offenders[0]
