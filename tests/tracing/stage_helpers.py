"""What the stage tests build: small TFRecord files, a pipeline's options, its batches."""

import numpy as np

from object_input.writers import write_tfrecords
from object_input.writers.synthetic import synthetic_examples

STEPS = [("random_horizontal_flip", {"probability": 0.5}), "random_adjust_brightness"]


def write(directory, seed=1, count=6):
    """``count`` synthetic examples in one TFRecord file under ``directory``; its path."""
    write_tfrecords(list(synthetic_examples(count, seed=seed, max_objects=3)), directory / "t")
    return str(directory)


def options(**given):
    """``make_dataset``'s keywords for batches of 2 of :data:`STEPS`, seeded, unshuffled."""
    return {"batch_size": 2, "shuffle": False, "seed": 3, "augment": STEPS, **given}


def arrays(dataset):
    """The batches of ``dataset`` as dicts of numpy arrays."""
    return [{name: value.numpy() for name, value in batch.items()} for batch in dataset]


def assert_same(first, second):
    """Equal batches: the same fields, in the same order, with the same values."""
    assert len(first) == len(second)
    for a, b in zip(first, second, strict=True):
        assert list(a) == list(b)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
