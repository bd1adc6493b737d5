"""``make_dataset``: files to a batched, prefetched ``tf.data.Dataset`` of detection examples.

The pipeline composes the parts: reader (list, shard, shuffle and interleave files) → record
shuffle → repeat → per-example seed → decode → augment → resize / box limit → padded batch →
prefetch. Each stage lives in its own module; this one only wires them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import batching, fields
from object_input.decoders import ExampleDecoder
from object_input.ops import Augmentation, core, deferred
from object_input.ops.resize import resize_features
from object_input.readers import list_files, tfrecord_dataset

AUTOTUNE = tf.data.AUTOTUNE
SERVICE_MODES = ("distributed_epoch", "parallel_epochs")
OUTPUT_DTYPES = (None, "uint8", "float32", "bfloat16")


@dataclasses.dataclass
class DatasetOptions:
    """Every ``make_dataset`` option, with its default. See :func:`make_dataset`."""

    source: Any = None
    batch_size: int | None = None
    augment: Sequence[Any] = ()
    image_size: Sequence[int] | None = None
    pad_image_size: Sequence[int] | None = None
    max_boxes: int | None = None
    batching: str = "dynamic"
    box_overflow: str = "error"
    drop_remainder: bool = False
    shuffle: bool = True
    shuffle_buffer_size: int = 2048
    file_shuffle: bool = True
    num_epochs: int | None = 1
    num_readers: int = 8
    block_length: int = 1
    compression: str | None = "auto"
    num_shards: int = 1
    shard_index: int = 0
    input_context: tf.distribute.InputContext | None = None
    num_parallel_calls: int = AUTOTUNE
    prefetch: int = AUTOTUNE
    deterministic: bool = True
    seed: int | None = None
    keras: bool = False
    channels: int = 3
    label_map: str | os.PathLike | Mapping[str, int] | None = None
    masks: str | None = None
    num_keypoints: int = 0
    multiclass_scores: bool = False
    unknown_classes: str = "error"
    extra_features: Mapping[str, Any] | None = None
    service: str | None = None
    service_mode: str = "distributed_epoch"
    service_job_name: str | None = None
    defer_decode: bool = True
    output_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.source is None:
            raise ValueError("make_dataset needs a source (glob, file list or directory)")
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        if self.batching not in batching.BATCHING_MODES:
            raise ValueError(
                f"batching must be one of {batching.BATCHING_MODES}, got {self.batching!r}"
            )
        if self.box_overflow not in batching.OVERFLOW_POLICIES:
            raise ValueError(
                f"box_overflow must be one of {batching.OVERFLOW_POLICIES}, "
                f"got {self.box_overflow!r}"
            )
        if self.max_boxes is not None and self.max_boxes < 1:
            raise ValueError(f"max_boxes must be >= 1, got {self.max_boxes}")
        for name in ("image_size", "pad_image_size"):
            size = getattr(self, name)
            if size is not None and (len(size) != 2 or min(size) < 1):
                raise ValueError(f"{name} must be (height, width) of positive ints, got {size!r}")
        if self.image_size is not None and self.pad_image_size is not None:
            raise ValueError("give image_size (resize) or pad_image_size (pad), not both")
        if self.batching == "static":
            if self.max_boxes is None:
                raise ValueError("batching='static' needs max_boxes")
            if self.image_size is None and self.pad_image_size is None:
                raise ValueError(
                    "batching='static' needs image_size (resize to it) or pad_image_size "
                    "(pad up to it) so that every batch has one shape"
                )
        if self.num_epochs is not None and self.num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1 or None (forever), got {self.num_epochs}")
        if self.service_mode not in SERVICE_MODES:
            raise ValueError(
                f"service_mode must be one of {SERVICE_MODES}, got {self.service_mode!r}"
            )
        if self.output_dtype not in OUTPUT_DTYPES:
            raise ValueError(
                f"output_dtype must be one of {OUTPUT_DTYPES}, got {self.output_dtype!r}"
            )
        if self.input_context is not None:
            self.num_shards = self.input_context.num_input_pipelines
            self.shard_index = self.input_context.input_pipeline_id
        if not isinstance(self.augment, Augmentation):
            self.augment = Augmentation(self.augment or ())


def make_dataset(source: Any = None, *, config: Any = None, **options: Any) -> tf.data.Dataset:
    """A batched, prefetched dataset of decoded, augmented detection examples.

    Args:
      source: glob pattern, directory, file, or list of those (TFRecords of ``tf.train.Example``).
      config: a :class:`object_input.config.PipelineConfig` (e.g. from ``load_pipeline_config``);
        explicit keyword options override its values.
      **options: the fields of :class:`DatasetOptions`:
        batch_size; augment (list of steps); image_size (resize to (h, w)); pad_image_size;
        max_boxes; batching ("dynamic" pads to the batch maxima, "static" to max_boxes and a fixed
        image size); box_overflow ("error" or "truncate", counted in ``num_dropped_boxes``);
        drop_remainder; shuffle, shuffle_buffer_size, file_shuffle; num_epochs (None = forever);
        num_readers, block_length, compression; num_shards/shard_index or input_context;
        num_parallel_calls, prefetch, deterministic, seed; keras (yield ``(images, labels)``);
        decoder options channels, label_map, masks, num_keypoints, multiclass_scores,
        unknown_classes, extra_features; service ("grpc://host:port" of a tf.data service
        dispatcher: decoding, augmentation and batching then run on its workers), service_mode
        ("distributed_epoch": each example once per epoch across workers; "parallel_epochs":
        every worker produces whole epochs), service_job_name (consumers sharing a job name share
        its data); defer_decode (default True: when the steps start with flips and a
        random_crop_image, decode only the crop window; the pixels are the same); output_dtype
        (None keeps uint8 until an op makes floats; "uint8" rounds and saturates, "float32",
        "bfloat16").

    With a ``seed``, batches are identical run after run whatever the parallelism: every example
    gets a stateless seed derived from the pipeline seed and its position in the stream.
    """
    merged = dict(config.to_dataset_kwargs()) if config is not None else {}
    if source is not None:
        merged["source"] = source
    merged.update(options)
    opts = DatasetOptions(**merged)
    return _build(opts)


def _build(opts: DatasetOptions) -> tf.data.Dataset:
    files = list_files(opts.source)
    records = tfrecord_dataset(
        files,
        compression=opts.compression,
        num_shards=opts.num_shards,
        shard_index=opts.shard_index,
        shuffle_files=opts.shuffle and opts.file_shuffle,
        seed=opts.seed,
        num_readers=opts.num_readers,
        block_length=opts.block_length,
        deterministic=opts.deterministic,
    )
    if opts.shuffle:
        records = records.shuffle(
            opts.shuffle_buffer_size, seed=opts.seed, reshuffle_each_iteration=True
        )
    records = records.repeat(opts.num_epochs)
    records = _with_example_seeds(records, opts)

    decoder = ExampleDecoder(
        channels=opts.channels,
        label_map=opts.label_map,
        masks=opts.masks,
        num_keypoints=opts.num_keypoints,
        multiclass_scores=opts.multiclass_scores,
        unknown_classes=opts.unknown_classes,
        extra_features=opts.extra_features,
    )
    augment = opts.augment
    # Leading flips and crops run before decoding: only the crop window is then decoded.
    deferred_steps = 0
    if opts.defer_decode and opts.channels in (1, 3):
        deferred_steps = deferred.deferrable_prefix(augment.names())

    # The ops use tf.cond explicitly: AutoGraph conversion would only slow tracing down.
    @tf.autograph.experimental.do_not_convert
    def process(seed: tf.Tensor, record_id: tf.Tensor, serialized: tf.Tensor) -> dict:
        features = decoder(serialized, record_id, defer_image=deferred_steps > 0)
        seed = seed if opts.seed is not None else None
        if deferred_steps:
            features = augment(features, seed, stop=deferred_steps)
            features = deferred.realize(features, opts.channels)
        if len(augment) > deferred_steps:
            features = augment(features, seed, start=deferred_steps)
        if opts.image_size is not None:
            features = resize_features(features, *opts.image_size)
        elif opts.pad_image_size is not None:
            features = batching.check_fits(features, *opts.pad_image_size)
        if opts.output_dtype is not None:
            features = dict(features)
            features[fields.IMAGE] = core.like(
                features[fields.IMAGE], tf.as_dtype(opts.output_dtype)
            )
        return batching.prepare(features, opts.max_boxes, opts.box_overflow)

    dataset = records.map(
        process, num_parallel_calls=opts.num_parallel_calls, deterministic=opts.deterministic
    )
    dataset = batching.batch_features(
        dataset,
        opts.batch_size,
        mode=opts.batching,
        max_boxes=opts.max_boxes,
        image_size=opts.image_size or opts.pad_image_size,
        drop_remainder=opts.drop_remainder,
    )
    if opts.keras:
        dataset = dataset.map(to_keras, num_parallel_calls=opts.num_parallel_calls)
    options = tf.data.Options()
    options.deterministic = opts.deterministic
    dataset = dataset.with_options(options)
    if opts.service is not None:
        # Everything above runs on the tf.data service workers; this process only receives batches.
        dataset = dataset.apply(
            tf.data.experimental.service.distribute(
                opts.service_mode, opts.service, job_name=opts.service_job_name
            )
        )
    return dataset.prefetch(opts.prefetch)


def _with_example_seeds(records: tf.data.Dataset, opts: DatasetOptions) -> tf.data.Dataset:
    """Attach a stateless seed to each record: ``fold_in([salt, shard], position)``.

    The salts come from ``Dataset.random(seed)`` with ``rerandomize_each_iteration``: reproducible
    for a seed, yet new each time the dataset is iterated anew (as Keras does every epoch), so
    epochs differ even when the dataset itself holds one epoch.
    """
    base = opts.seed if opts.seed is not None else 0
    salts = tf.data.Dataset.random(seed=base, rerandomize_each_iteration=True)
    shard = opts.shard_index

    @tf.autograph.experimental.do_not_convert
    def attach(position, salt, record):
        record_id, serialized = record
        seed = core.fold_seed(tf.stack([tf.cast(salt % (2**31), tf.int32), shard]), position)
        return seed, record_id, serialized

    return tf.data.Dataset.zip((tf.data.Dataset.counter(), salts, records)).map(attach)


def to_keras(batch: dict) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """``(images, {"boxes", "classes"})`` for ``model.fit``; padded boxes get class -1."""
    valid = tf.sequence_mask(batch[fields.NUM_BOXES], tf.shape(batch[fields.CLASSES])[1])
    classes = tf.where(valid, batch[fields.CLASSES], -1)
    return batch[fields.IMAGE], {"boxes": batch[fields.BOXES], "classes": classes}
