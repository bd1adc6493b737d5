"""Records and small datasets the on_error suites (tests/reliability/test_on_error_*.py)
share: good examples, one bad field at a time, a TFRecord file of them."""

import numpy as np
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.writers import build_example, encode_image

IMAGE = np.full((16, 24, 3), 90, np.uint8)
LABEL_MAP = {"cat": 1, "dog": 2}


def good_example(index: int) -> tf.train.Example:
    """A valid example with one box and its mask, source id ``good-<index>``."""
    return build_example(
        IMAGE,
        boxes=[[0.1, 0.1, 0.6, 0.5]],
        classes=[1],
        source_id=f"good-{index}",
        masks=np.ones((1, 16, 24), np.uint8),
    )


def with_values(example: tf.train.Example, **values) -> bytes:
    """``example`` serialized with the features set (``a__b`` for ``a/b``; ``[]`` deletes)."""
    for key, value in values.items():
        key = key.replace("__", "/")
        value = value if isinstance(value, list) else [value]
        if not value:
            del example.features.feature[key]
            continue
        feature = example.features.feature[key]
        feature.Clear()
        if isinstance(value[0], bytes):
            feature.bytes_list.value.extend(value)
        elif isinstance(value[0], float):
            feature.float_list.value.extend(value)
        else:
            feature.int64_list.value.extend(value)
    return example.SerializeToString()


def bad_record(**values) -> bytes:
    """A good example with source id ``bad`` and the given features changed."""
    example = good_example(0)
    example.features.feature["image/source_id"].bytes_list.value[0] = b"bad"
    return with_values(example, **values)


def mask_png(height: int, width: int) -> bytes:
    """A PNG mask of ones."""
    return encode_image(np.ones((height, width, 1), np.uint8))


def truncated_jpeg() -> bytes:
    """The first half of a JPEG: TensorFlow's decoder fails on it."""
    data = encode_image(np.random.default_rng(0).integers(0, 255, (64, 64, 3), np.uint8), "jpeg")
    return data[: len(data) // 2]


def write_records(path, records) -> str:
    """Write ``records`` to the TFRecord file ``path``; its path as a string."""
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def records_with_bad(bad: bytes, count: int, at: int) -> list[bytes]:
    """``count`` good records with ``bad`` inserted at position ``at``."""
    records = [good_example(i).SerializeToString() for i in range(count)]
    records.insert(at, bad)
    return records


def small_dataset(source, **options):
    """make_dataset in stream order, one reader, batches of 4, unless ``options`` say otherwise."""
    options = {"batch_size": 4, "shuffle": False, "reading": {"num_readers": 1}, **options}
    return oi.make_dataset(source, **options)


def source_ids(dataset) -> list[list[str]]:
    """The source ids of every batch."""
    return [[s.decode() for s in batch[fields.SOURCE_ID].numpy()] for batch in dataset]
