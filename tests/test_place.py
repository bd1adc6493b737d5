"""An iterator's place: the vector's arithmetic, its size, and exact resume from it for every kind
of pipeline (skips, partners, aspect-ratio buckets, the device stage) at every batch."""

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from test_golden_outputs import STANDARD

import object_input as oi
from object_input import iterations, place
from object_input.writers import build_example


def _ints(tensor) -> list[int]:
    return [int(v) for v in tensor.numpy()]


def test_a_batch_in_order_moves_the_restart_with_it():
    after = place.advance(
        place.start(2), tf.constant([0, 1, 2], tf.int64), tf.constant(3, tf.int64)
    )
    assert _ints(after) == [2, 3, 3]
    after = place.advance(after, tf.constant([4, 5], tf.int64), tf.constant(6, tf.int64))
    assert _ints(after) == [2, 6, 6]


def test_held_examples_keep_the_restart_and_the_delivered_positions_are_bits():
    # Positions 1 and 3 still held: the restart stays at 1; 2, 4 and 5 were delivered.
    after = place.advance(
        tf.constant([0, 1, 1], tf.int64), tf.constant([2, 4, 5], tf.int64), tf.constant(1, tf.int64)
    )
    assert _ints(after) == [0, 1, 6, 0b11010]
    iteration, restart, seen, delivered = place.unpack(after)
    assert (int(iteration), int(restart), int(seen)) == (0, 1, 6)
    assert delivered.numpy().tolist() == [False, True, False, True, True]
    # 1 and 3 delivered: everything before 6 is out, the bits go.
    after = place.advance(after, tf.constant([1, 3], tf.int64), tf.constant(6, tf.int64))
    assert _ints(after) == [0, 6, 6]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=0, max_size=300), st.integers(0, 10**9))
def test_bits_round_trip(bits, offset):
    positions = offset + np.flatnonzero(bits).astype(np.int64)
    current = tf.constant([7, offset, offset], tf.int64)
    if len(positions):
        # Delivered out of order and held back: the restart stays at the offset.
        current = place.advance(
            current, tf.constant(positions[::-1]), tf.constant(offset, tf.int64)
        )
    _, restart, seen, delivered = place.unpack(current)
    assert int(restart) == offset
    width = int(positions.max()) + 1 - offset if len(positions) else 0
    assert int(seen) == offset + width
    assert delivered.numpy().tolist() == list(bits[:width])
    assert len(current) == 3 + -(-width // 63)


def _files(tmp_path, records=23, count=2, bad_in=None):
    """``count`` TFRecord files of ``records`` records; record 3 is bad in the files of
    ``bad_in`` (None: in every file)."""
    rng = np.random.default_rng(5)
    paths = []
    for shard in range(count):
        path = str(tmp_path / f"part-{shard}.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for i in range(records):
                shape = (12, 16, 3) if i % 3 else (16, 10, 3)  # two aspect-ratio buckets
                example = build_example(
                    rng.integers(0, 255, shape, np.uint8),
                    boxes=[[0.1, 0.2, 0.7, 0.9]],
                    classes=[1],
                    source_id=f"{shard}-{i}",
                )
                if i == 3 and (bad_in is None or shard in bad_in):  # a bad record, skipped
                    example.features.feature["image/object/class/label"].int64_list.value[0] = 0
                writer.write(example.SerializeToString())
        paths.append(path)
    return paths


PIPELINES = {
    "steps and skips": {
        "image_size": (8, 8),
        "augment": ["random_horizontal_flip", "random_crop_image"],
    },
    "mosaic": {
        "image_size": (16, 16),
        "augment": [("mosaic", {"output_size": (16, 16)}), "random_horizontal_flip"],
    },
    "aspect-ratio buckets": {"group_by_aspect_ratio": True, "augment": ["random_horizontal_flip"]},
    "buckets and mixup": {"group_by_aspect_ratio": True, "augment": ["mixup"]},
    "device stage": {
        "image_size": (8, 8),
        "trailing_steps": "device",
        "augment": ["random_horizontal_flip", "random_rotation"],
    },
    "batched stage, keras": {
        "image_size": (8, 8),
        "keras": True,
        "augment": ["random_horizontal_flip", "random_adjust_brightness"],
    },
}


def _make(files, **options):
    options = {"batch_size": 3, "num_epochs": 2, **options}
    return oi.make_dataset(
        files,
        seed=11,
        shuffle_buffer_size=5,
        on_error="skip",
        reading={"num_readers": 2},
        **options,
    )


def _digest(batch) -> tuple:
    leaves = [np.asarray(leaf) for leaf in tf.nest.flatten(batch)]
    return tuple(
        b"|".join(leaf.ravel().tolist()) if leaf.dtype == object else leaf.tobytes()
        for leaf in leaves
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_resume_at_every_batch_equals_the_uninterrupted_run(tmp_path, name):
    files = _files(tmp_path)
    whole = [_digest(batch) for batch in _make(files, **PIPELINES[name])]
    assert len(whole) >= 12
    # At the first batch, inside a partner group and a bucket, across the epochs, at the end.
    for delivered in sorted({1, 2, len(whole) // 2, len(whole) // 2 + 1, len(whole) - 1}):
        dataset = _make(files, **PIPELINES[name])
        iterator = iter(dataset)
        before = [_digest(next(iterator)) for _ in range(delivered)]
        state = iterations.progress_of(dataset).state()
        restored = _make(files, **PIPELINES[name])
        iterations.progress_of(restored).resume(state)
        after = [_digest(batch) for batch in restored]
        assert before + after == whole, (name, delivered, _ints(state))


def test_the_passes_of_an_iteration_do_not_depend_on_how_many_it_has(tmp_path):
    files = _files(tmp_path, records=7)
    options = {"batch_size": None, "image_size": (8, 8), "augment": ["random_horizontal_flip"]}

    def examples(num_epochs, count=None):
        dataset = _make(files, num_epochs=num_epochs, **options)
        return [_digest(example) for example in dataset.take(count or -1)]

    three = examples(3)
    assert len(three) == 3 * 12  # two records of 14 skipped in each pass
    assert examples(None, len(three) + 5)[: len(three)] == three
    assert examples(1) == three[:12]
    # Each pass its own order.
    assert len({tuple(three[:12]), tuple(three[12:24]), tuple(three[24:])}) == 3


@pytest.mark.slow
@pytest.mark.parametrize("name", ["steps and skips", "mosaic"])
def test_a_restore_deep_in_an_endless_stream_continues_it_exactly(tmp_path, name):
    files = _files(tmp_path, records=4)  # 6 records a pass

    def make():
        return _make(files, num_epochs=None, batch_size=2, **PIPELINES[name])

    whole = [_digest(batch) for batch in make().take(24)]
    dataset = make()
    iterator = iter(dataset)
    for _ in range(20):  # into the seventh pass
        next(iterator)
    state = iterations.progress_of(dataset).state()
    assert _ints(state)[2] >= 36
    restored = make()
    iterations.progress_of(restored).resume(state)
    assert [_digest(batch) for batch in restored.take(4)] == whole[20:]


def test_a_restore_deep_in_an_endless_stream_does_not_read_the_passes_before_it():
    yielded = []

    def records():
        for i in range(10):
            yielded.append(i)
            yield {"image": np.full([2, 2, 3], i, np.uint8)}

    def make():
        source = oi.sources.Generator(records, {"image": tf.TensorSpec([2, 2, 3], tf.uint8)})
        return oi.make_dataset(source, batch_size=5, seed=2, num_epochs=None)

    whole = [batch["image"].numpy() for batch in make().take(202)]
    restored = make()
    iterations.progress_of(restored).resume([0, 1005, 1005])  # 5 records into pass 100
    yielded.clear()
    batch = next(iter(restored))
    np.testing.assert_array_equal(batch["image"], whole[201])
    # Pass 0 read to count a pass, then pass 100 and what the prefetching reads ahead of the
    # batch (about 50 records here): not the 1,000 records before the place.
    assert len(yielded) <= 150


def test_a_finished_iteration_saves_the_start_of_the_next(tmp_path):
    files = _files(tmp_path, records=4)
    dataset = _make(files, image_size=(8, 8))
    first = [_digest(batch) for batch in dataset]
    progress = iterations.progress_of(dataset)
    assert _ints(progress.state()) == [1, 0, 0]
    second = [_digest(batch) for batch in dataset]
    restored = _make(files, image_size=(8, 8))
    iterations.progress_of(restored).resume(tf.constant([1, 0, 0], tf.int64))
    assert [_digest(batch) for batch in restored] == second != first


@pytest.mark.slow
def test_a_checkpoint_of_the_standard_pipeline_in_its_second_epoch_is_small(tmp_path):
    rng = np.random.default_rng(0)
    path = str(tmp_path / "photos.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(40):
            image = rng.integers(0, 255, (96, 128, 3), np.uint8)
            example = build_example(image, boxes=[[0.1, 0.2, 0.7, 0.9]], classes=[1])
            writer.write(example.SerializeToString())
    dataset = oi.make_dataset(
        path,
        batch_size=8,
        seed=1,
        num_epochs=3,
        image_size=(64, 64),
        augment=list(STANDARD),
    )
    iterator = iter(dataset)
    for _ in range(7):  # into the second epoch of the iteration
        next(iterator)
    checkpoint = tf.train.Checkpoint(data=iterations.progress_of(dataset))
    checkpoint.save(str(tmp_path / "ckpt" / "data"))
    assert _ints(iterations.progress_of(dataset).state()) == [0, 56, 56]
    size = sum(p.stat().st_size for p in (tmp_path / "ckpt").iterdir())
    assert size < 64 * 1024
    # Against the iterator's own checkpoint: its shuffle buffer of 2,048 records.
    tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "buffers" / "data"))
    assert sum(p.stat().st_size for p in (tmp_path / "buffers").iterdir()) > 20 * size


def test_a_place_inside_an_iteration_does_not_restore_onto_other_shards(tmp_path):
    files = _files(tmp_path, records=6)
    options = {"image_size": (8, 8), "reading": {"num_shards": 2, "shard_index": 0}}
    dataset = oi.make_dataset(files, batch_size=2, seed=3, **options)
    next(iter(dataset))
    path = tf.train.Checkpoint(data=iterations.progress_of(dataset)).save(str(tmp_path / "c"))
    other = oi.make_dataset(files, batch_size=2, seed=3, image_size=(8, 8))
    with pytest.raises(ValueError, match="saved by shard 0 of 2 input shards, inside iteration 0"):
        tf.train.Checkpoint(data=iterations.progress_of(other)).restore(path)


def test_resume_rejects_what_is_not_a_place():
    dataset = oi.make_dataset(
        tf.data.Dataset.from_tensors({"image": tf.zeros([2, 2, 3], tf.uint8)})
    )
    with pytest.raises(ValueError, match="not the state of a make_dataset iterator"):
        iterations.progress_of(dataset).resume([1, 2])
