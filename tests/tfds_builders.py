"""Small TensorFlow Datasets builders for tests, prepared in a temporary folder: nothing is
downloaded. Importing this module skips the importing test without ``tensorflow-datasets``."""

from __future__ import annotations

import numpy as np
import pytest

tfds = pytest.importorskip("tensorflow_datasets", reason="pip install '.[tfds]'")

CLASS_NAMES = ["cat", "dog", "bird"]
# (image id, height, width, boxes, labels, crowd flags)
EXAMPLES = [
    (10, 24, 32, [[0.1, 0.2, 0.5, 0.6], [0.0, 0.0, 1.0, 1.0]], [0, 2], [False, True]),
    (11, 16, 16, [], [], []),
    (12, 20, 12, [[0.25, 0.25, 0.75, 0.5]], [1], [False]),
    (
        13,
        32,
        24,
        [[0.5, 0.5, 0.9, 0.95], [0.1, 0.1, 0.2, 0.2], [0.3, 0.0, 0.6, 0.3]],
        [2, 0, 1],
        [False, False, True],
    ),
    (14, 8, 40, [[0.0, 0.1, 1.0, 0.9]], [0], [False]),
    (15, 40, 40, [[0.2, 0.3, 0.4, 0.5]], [1], [True]),
]


def pixels(seed: int, height: int, width: int) -> np.ndarray:
    """The RGB image of example ``seed``."""
    return np.random.default_rng(seed).integers(0, 256, [height, width, 3], dtype=np.uint8)


class TinyDetection(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Six images with boxes, labels and crowd flags, in the layout of coco."""

    VERSION = tfds.core.Version("1.0.0")
    BUILDER_CONFIGS = (tfds.core.BuilderConfig(name="png"), tfds.core.BuilderConfig(name="jpeg"))

    def _info(self):
        objects = {
            "bbox": tfds.features.BBoxFeature(),
            "label": tfds.features.ClassLabel(names=CLASS_NAMES),
            "is_crowd": np.bool_,
        }
        features = {
            "image": tfds.features.Image(encoding_format=self.builder_config.name),
            "image/id": np.int64,
            "objects": tfds.features.Sequence(objects),
        }
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(features))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for image_id, height, width, boxes, labels, crowd in EXAMPLES:
            yield (
                image_id,
                {
                    "image": pixels(image_id, height, width),
                    "image/id": image_id,
                    "objects": {
                        "bbox": [tfds.features.BBox(*box) for box in boxes],
                        "label": labels,
                        "is_crowd": crowd,
                    },
                },
            )


# The fields= that sources.TFDS reads RawDetection with.
RAW_FIELDS = {"image": "image", "source_id": "image/id", "boxes": "boxes", "classes": "classes"}


class RawDetection(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """The examples it is made with, written as given: encoded image bytes, boxes as plain
    float tensors and 1-based classes as plain integers, each in a sequence of its own, so that
    any bytes, coordinates, ids and counts can be written (``BBoxFeature``, ``ClassLabel`` and
    one object sequence would refuse the bad ones)."""

    VERSION = tfds.core.Version("1.0.0")

    def __init__(self, *, examples: list[tuple[bytes, list, list]], **kwargs):
        """``examples``: (encoded image, boxes [ymin, xmin, ymax, xmax], classes) each; an
        example's id is its index."""
        self.examples = examples
        super().__init__(**kwargs)

    def _info(self):
        features = {
            "image": tfds.features.Image(),
            "image/id": np.int64,
            "boxes": tfds.features.Sequence(tfds.features.Tensor(shape=(4,), dtype=np.float32)),
            "classes": tfds.features.Sequence(np.int64),
        }
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(features))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        for index, (image, boxes, classes) in enumerate(self.examples):
            yield (
                index,
                {
                    "image": image,
                    "image/id": index,
                    "boxes": np.asarray(boxes, np.float32).reshape(-1, 4),
                    "classes": np.asarray(classes, np.int64),
                },
            )


def prepare(builder: tfds.core.DatasetBuilder, num_shards: int = 1) -> tfds.core.DatasetBuilder:
    """``builder`` with its data prepared in ``num_shards`` files."""
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(num_shards=num_shards)
    )
    return builder


def record_ids(builder: tfds.core.DatasetBuilder) -> dict[int, str]:
    """``{image id: record id}`` of the ``train`` split, as ``sources.TFDS`` names them."""
    examples = builder.as_dataset(
        split="train",
        read_config=tfds.ReadConfig(add_tfds_id=True),
        # Encoded images stay encoded: one may be broken on purpose.
        decoders={"image": tfds.decode.SkipDecoding()},
    )
    prefix = f"{builder.info.full_name}/train:"
    return {int(ex["image/id"]): prefix + ex["tfds_id"].decode() for ex in tfds.as_numpy(examples)}
