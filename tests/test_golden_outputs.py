"""Seeded pipelines give the very batches they gave when their digests were recorded.

A refactor of the steps, the stages or the pipeline that is meant to change nothing must keep
every digest in ``tests/data/golden_digests.json``. A change that is meant to change outputs
records the new digests, and its commit says why they changed:

    python tests/test_golden_outputs.py --record

Digests are of the exact bytes of every tensor of every batch (names, dtypes, shapes, values):
a difference of one bit in one pixel changes them. TensorFlow's float kernels (oneDNN's and
Eigen's convolutions, the projective transform) round differently with the vector instructions
the CPU has, so the digests are kept per CPU family (:func:`cpu_family`): the recording command
records this machine's family's, after checking that the difference from another family's is
only rounding. (On x86-64, AVX-512 and AVX2 machines give different bits for the pipelines with
rotation, blur and sharpness; the others are the same.)
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import platform
import sys
import tempfile
from collections.abc import Callable

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input.writers.synthetic import write_synthetic_dataset

GOLDEN = pathlib.Path(__file__).parent / "data" / "golden_digests.json"
STANDARD = (
    "random_horizontal_flip",
    "random_crop_image",
    "random_adjust_brightness",
    "random_adjust_contrast",
    "random_adjust_hue",
    "random_adjust_saturation",
)
TRAILING = (
    "random_horizontal_flip",
    ("random_rotation", {"max_angle": 20.0}),
    "random_gaussian_blur",
    "random_sharpness",
    "random_adjust_brightness",
)
SIZE = (64, 64)


def _pipelines(pattern: str) -> dict[str, Callable[[], tf.data.Dataset]]:
    """Each recorded pipeline by name, built over the synthetic files ``pattern``."""

    def make(**options) -> Callable[[], tf.data.Dataset]:
        return lambda: oi.make_dataset(pattern, batch_size=4, seed=11, **options)

    return {
        "plain": make(),
        "standard": make(augment=STANDARD, image_size=SIZE),
        "standard_exact": make(augment=STANDARD, image_size=SIZE, trailing_steps="exact"),
        "static_masks": make(
            augment=STANDARD, image_size=SIZE, batching="static", max_boxes=8, masks="png"
        ),
        "keras_detection": make(
            augment=STANDARD,
            image_size=SIZE,
            batching="static",
            max_boxes=8,
            keras="detection",
            bounding_box_format="xyxy",
        ),
        "skip": make(augment=STANDARD, image_size=SIZE, on_error="skip"),
        "trailing_exact": make(augment=TRAILING, image_size=SIZE, trailing_steps="exact"),
        "trailing_default": make(augment=TRAILING, image_size=SIZE),
        "trailing_device": make(
            augment=TRAILING,
            image_size=SIZE,
            batching="static",
            max_boxes=8,
            trailing_steps="device",
        ),
        "randaugment": make(augment=["randaugment_detection"], image_size=SIZE),
        "autoaugment": make(augment=["autoaugment_image"], image_size=SIZE),
        "mosaic": make(augment=[("mosaic", {"output_size": SIZE}), "mixup"], image_size=SIZE),
        "uint8": make(augment=STANDARD, image_size=SIZE, output_dtype="uint8"),
    }


def _digest(dataset: tf.data.Dataset, directory: str) -> str:
    """sha256 of every batch's tensors, by name, with their dtypes and shapes; strings (record
    ids) without ``directory``, the files' temporary folder."""
    digest = hashlib.sha256()
    for batch in dataset.as_numpy_iterator():
        for path, value in sorted(_flatten(batch)):
            value = np.asarray(value)
            if value.dtype == object:
                value = np.char.replace(value.astype(bytes), directory.encode(), b"")
            digest.update(f"{path}|{value.dtype}|{value.shape}|".encode())
            digest.update(value.tobytes())
    return digest.hexdigest()


def _flatten(value, path: str = "") -> list[tuple[str, object]]:
    if isinstance(value, dict):
        return [item for key, v in value.items() for item in _flatten(v, f"{path}/{key}")]
    if isinstance(value, tuple | list):
        return [item for i, v in enumerate(value) for item in _flatten(v, f"{path}/{i}")]
    return [(path, value)]


def _write(directory: pathlib.Path) -> str:
    write_synthetic_dataset(directory, num_examples=12, num_shards=2, seed=5, min_objects=1)
    return str(directory / "synthetic-*")


def _directory(pattern: str) -> str:
    return str(pathlib.Path(pattern).parent)


@pytest.fixture(scope="module")
def pattern(tmp_path_factory) -> str:
    return _write(tmp_path_factory.mktemp("golden"))


# The digests the short loop (-m "not slow") checks: the standard exact pipeline and the ones
# that take about a second; the others take 1.5-3.5 s each and CI checks them.
LOOP_DIGESTS = {"standard_exact", "plain", "trailing_exact", "trailing_device"}


@pytest.mark.parametrize(
    "name",
    [
        name if name in LOOP_DIGESTS else pytest.param(name, marks=pytest.mark.slow)
        for name in sorted(_pipelines(""))
    ],
)
def test_seeded_pipeline_gives_its_recorded_batches(pattern, name):
    family = cpu_family()
    recorded = json.loads(GOLDEN.read_text()).get(family, {})
    assert name in recorded, f"no digest recorded for {name!r} on {family}: {RECORD}"
    assert _digest(_pipelines(pattern)[name](), _directory(pattern)) == recorded[name]


def test_every_recorded_digest_has_its_pipeline():
    for digests in json.loads(GOLDEN.read_text()).values():
        assert sorted(digests) == sorted(_pipelines(""))


RECORD = f"python {__file__} --record"


def cpu_family() -> str:
    """The machine's architecture and the widest vector instructions its float kernels use."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # numpy 1
        from numpy.core._multiarray_umath import __cpu_features__ as features
    widest = next((name for name in ("AVX512F", "AVX2") if features.get(name)), "base")
    return f"{platform.machine()}-{widest.lower()}"


def _record() -> None:
    with tempfile.TemporaryDirectory() as directory:
        pattern = _write(pathlib.Path(directory))
        digests = {
            name: _digest(build(), _directory(pattern))
            for name, build in sorted(_pipelines(pattern).items())
        }
    families = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    families[cpu_family()] = digests
    GOLDEN.write_text(json.dumps(dict(sorted(families.items())), indent=2) + "\n")
    print(f"recorded {len(digests)} digests for {cpu_family()} in {GOLDEN}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit(f"usage: python {sys.argv[0]} --record")
    _record()
