"""The TF1 baseline: a queue-runner input pipeline written the way the Object Detection API did.

    python benchmarks/queue_runners.py [--images 256] [--data /tmp/oi-bench]

Graph mode through ``tf.compat.v1``: ``string_input_producer`` → ``TFRecordReader`` →
``parse_single_example`` → ``decode_jpeg`` → float image → random horizontal flip, random crop
(``sample_distorted_bounding_box`` with the API's defaults), random brightness, contrast, hue and
saturation (each converting to [0, 1] and back, as the API's steps do) → bilinear resize →
``train.batch(dynamic_pad=True)``, fed by QueueRunner threads under a Coordinator.

Importable: :class:`QueueRunnerPipeline` owns a graph, a session and the threads, and stops and
joins them on ``close``; iterating it yields batch sizes, which is how ``benchmarks/speed.py``
times it side by side with ``tf.data``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from common import time_stream, write_benchmark_records

v1 = tf.compat.v1
# The baseline uses the deprecated queue API on purpose; its warnings would bury the results.
v1.logging.set_verbosity(v1.logging.ERROR)

# Object Detection API defaults of the steps this baseline runs.
FLIP_PROBABILITY = 0.5
CROP_MIN_OBJECT_COVERED = 1.0
CROP_ASPECT_RATIO_RANGE = (0.75, 1.33)
CROP_AREA_RANGE = (0.1, 1.0)
CROP_OVERLAP_THRESH = 0.3
CROP_MAX_ATTEMPTS = 100
BRIGHTNESS_MAX_DELTA = 0.2
CONTRAST_RANGE = (0.8, 1.25)
HUE_MAX_DELTA = 0.02
SATURATION_RANGE = (0.8, 1.25)
# The API's train_config default for batch_queue_capacity.
BATCH_QUEUE_CAPACITY = 150

_BOX_KEYS = tuple(f"image/object/bbox/{c}" for c in ("ymin", "xmin", "ymax", "xmax"))


def parse_example(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
    """Parse the detection schema (image, size, ids, boxes, class ids) and decode the JPEG.

    Returns ``image`` (float32 ``[H, W, 3]`` on [0, 255], converted once as the API's input queue
    did), ``boxes`` float32 ``[N, 4]``, ``classes`` int32 ``[N]`` and ``source_id``.
    """
    string = v1.FixedLenFeature((), tf.string, default_value="")
    spec = {
        "image/encoded": string,
        "image/format": string,
        "image/filename": string,
        "image/source_id": string,
        "image/height": v1.FixedLenFeature((), tf.int64, default_value=0),
        "image/width": v1.FixedLenFeature((), tf.int64, default_value=0),
        "image/object/class/label": v1.VarLenFeature(tf.int64),
        **{key: v1.VarLenFeature(tf.float32) for key in _BOX_KEYS},
    }
    parsed = v1.parse_single_example(serialized, spec)
    image = tf.image.decode_jpeg(parsed["image/encoded"], channels=3)
    boxes = tf.stack([v1.sparse_tensor_to_dense(parsed[key]) for key in _BOX_KEYS], axis=1)
    classes = v1.sparse_tensor_to_dense(parsed["image/object/class/label"])
    return {
        "image": tf.cast(image, tf.float32),
        "boxes": boxes,
        "classes": tf.cast(classes, tf.int32),
        "source_id": parsed["image/source_id"],
    }


def random_horizontal_flip(image: tf.Tensor, boxes: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Flip image and boxes left-right with probability 0.5 (one stateful draw)."""
    flip = v1.random_uniform([]) < FLIP_PROBABILITY
    ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=1)
    flipped_boxes = tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=1)
    image = tf.cond(flip, lambda: tf.image.flip_left_right(image), lambda: image)
    boxes = tf.cond(flip, lambda: flipped_boxes, lambda: boxes)
    return image, boxes


def random_crop_image(
    image: tf.Tensor, boxes: tf.Tensor, classes: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Crop a ``sample_distorted_bounding_box`` window; keep boxes ≥ 30 % inside, re-framed.

    A box survives when the part of its own area inside the window is at least the overlap
    threshold (boxes entirely outside have none); survivors move to the window's frame and are
    clipped to [0, 1].
    """
    begin, size, window = v1.image.sample_distorted_bounding_box(
        tf.shape(image),
        bounding_boxes=tf.expand_dims(tf.clip_by_value(boxes, 0.0, 1.0), 0),
        min_object_covered=CROP_MIN_OBJECT_COVERED,
        aspect_ratio_range=CROP_ASPECT_RATIO_RANGE,
        area_range=CROP_AREA_RANGE,
        max_attempts=CROP_MAX_ATTEMPTS,
        use_image_if_no_bounding_boxes=True,
    )
    image = tf.slice(image, begin, size)
    window = tf.reshape(window, [4])
    low = tf.maximum(boxes[:, :2], window[:2])
    high = tf.minimum(boxes[:, 2:], window[2:])
    inside = tf.reduce_prod(tf.maximum(high - low, 0.0), axis=1)
    area = tf.reduce_prod(boxes[:, 2:] - boxes[:, :2], axis=1)
    keep = tf.reshape(tf.where(inside >= CROP_OVERLAP_THRESH * area), [-1])
    boxes = tf.gather(boxes, keep)
    classes = tf.gather(classes, keep)
    origin = tf.tile(window[:2], [2])
    extent = tf.tile(window[2:] - window[:2], [2])
    boxes = tf.clip_by_value((boxes - origin) / extent, 0.0, 1.0)
    return image, boxes, classes


def _on_unit_scale(image: tf.Tensor, adjust: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """The API's colour-step pattern: scale to [0, 1], adjust, clip, scale back to [0, 255]."""
    return tf.clip_by_value(adjust(image / 255.0), 0.0, 1.0) * 255.0


def random_adjust_brightness(image: tf.Tensor) -> tf.Tensor:
    """Add a delta U(-0.2, 0.2) on the [0, 1] scale."""
    return _on_unit_scale(image, lambda x: tf.image.random_brightness(x, BRIGHTNESS_MAX_DELTA))


def random_adjust_contrast(image: tf.Tensor) -> tf.Tensor:
    """Scale contrast by U(0.8, 1.25)."""
    return _on_unit_scale(image, lambda x: tf.image.random_contrast(x, *CONTRAST_RANGE))


def random_adjust_hue(image: tf.Tensor) -> tf.Tensor:
    """Rotate hue by U(-0.02, 0.02) turns."""
    return _on_unit_scale(image, lambda x: tf.image.random_hue(x, HUE_MAX_DELTA))


def random_adjust_saturation(image: tf.Tensor) -> tf.Tensor:
    """Scale saturation by U(0.8, 1.25)."""
    return _on_unit_scale(image, lambda x: tf.image.random_saturation(x, *SATURATION_RANGE))


def augment(example: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The six steps in the order of the benchmark's standard configuration."""
    image, boxes = random_horizontal_flip(example["image"], example["boxes"])
    image, boxes, classes = random_crop_image(image, boxes, example["classes"])
    image = random_adjust_brightness(image)
    image = random_adjust_contrast(image)
    image = random_adjust_hue(image)
    image = random_adjust_saturation(image)
    return {**example, "image": image, "boxes": boxes, "classes": classes}


def build_batch(
    files: Sequence[str],
    *,
    batch_size: int = 8,
    image_size: tuple[int, int] = (512, 512),
    num_threads: int = 2,
    capacity: int = BATCH_QUEUE_CAPACITY,
) -> dict[str, tf.Tensor]:
    """Add the whole pipeline to the default graph; returns the dequeued batch tensors.

    Keys: ``image`` float32 ``[B, h, w, 3]``, ``boxes`` ``[B, N, 4]`` and ``classes`` ``[B, N]``
    zero-padded to the batch's largest N, ``num_boxes`` ``[B]``, ``source_id`` ``[B]``.
    """
    filename_queue = v1.train.string_input_producer(list(files), shuffle=True)
    _, serialized = v1.TFRecordReader().read(filename_queue)
    example = augment(parse_example(serialized))
    image = v1.image.resize_images(example["image"], list(image_size))
    image.set_shape([*image_size, 3])
    return v1.train.batch(
        {
            "image": image,
            "boxes": example["boxes"],
            "classes": example["classes"],
            "num_boxes": tf.shape(example["boxes"])[0],
            "source_id": example["source_id"],
        },
        batch_size=batch_size,
        num_threads=num_threads,
        capacity=capacity,
        dynamic_pad=True,
    )


class QueueRunnerPipeline:
    """A graph, a session and the QueueRunner threads of :func:`build_batch`.

    Use as a context manager (or call :meth:`close`): closing asks the Coordinator to stop, which
    cancels the queues' pending enqueues, then joins every thread and closes the session. As an
    iterator it yields the size of each batch it dequeues (see :meth:`next_batch_size`).
    """

    def __init__(self, files: Sequence[str], *, seed: int | None = None, **options):
        self.graph = tf.Graph()
        with self.graph.as_default():
            if seed is not None:
                v1.set_random_seed(seed)
            self.batch = build_batch(files, **options)
            # Fetching the box counts runs the dequeue without copying the images out of the
            # graph, as a model consuming the batch in-graph would.
            self._count = self.batch["num_boxes"]
            self.session = v1.Session(graph=self.graph)
            self.coordinator = v1.train.Coordinator()
            self.threads = v1.train.start_queue_runners(self.session, self.coordinator)

    def next_batch(self) -> dict[str, np.ndarray]:
        """Dequeue one batch and fetch all of it as NumPy arrays."""
        return self.session.run(self.batch)

    def next_batch_size(self) -> int:
        """Dequeue one batch, fetch only its box counts; returns the number of images."""
        return len(self.session.run(self._count))

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        return self.next_batch_size()

    def close(self) -> None:
        """Stop and join the threads, then close the session."""
        self.coordinator.request_stop()
        self.coordinator.join(self.threads, stop_grace_period_secs=10)
        self.session.close()

    def __enter__(self) -> QueueRunnerPipeline:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--data", default="/tmp/oi-bench")
    args = parser.parse_args()
    os.makedirs(args.data, exist_ok=True)
    files = sorted(tf.io.gfile.glob(write_benchmark_records(args.data)))

    with QueueRunnerPipeline(files, batch_size=args.batch_size, seed=1) as pipeline:
        batch = pipeline.next_batch()
    print({key: (value.shape, value.dtype.name) for key, value in batch.items()})
    timing = time_stream(
        lambda: QueueRunnerPipeline(files, batch_size=args.batch_size), args.images
    )
    print(
        f"queue runners: {timing.images_per_s:.1f} images/s, "
        f"{timing.cpu_s_per_image * 1000:.1f} CPU ms/image, "
        f"first batch after {timing.first_batch_s:.2f} s"
    )


if __name__ == "__main__":
    main()
