"""``make_dataset``: a source to a batched, prefetched ``tf.data.Dataset`` of feature dicts.

The pipeline composes the parts and knows nothing of any record format: iteration number →
source (list, shard, shuffle and read records) → record shuffle → repeat → per-example seed →
decode → augment → resize / box limit → padded batch → the iterator's place → prefetch. Each
stage lives in its own module.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import tensorflow as tf

from object_input import batching, fields, iterations, partners, per_example, place
from object_input.keras import layout as keras_layout
from object_input.ops import Augmentation
from object_input.options import (
    AUTOTUNE,
    DATASET_OPTIONS,
    DecodeOptions,
    ReadOptions,
    ServiceOptions,
    checked_keywords,
    unknown_keyword,
)
from object_input.reliability.audit import DeliveryAudit
from object_input.reliability.error_policy import ErrorPolicy
from object_input.sources import ReadContext, Source, as_source
from object_input.sources._resolve import PathOptions
from object_input.tracing.maps import map_on_cpu

T = TypeVar("T")


def _applies_config(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` with its ``config=`` applied: the values the config sets replace the signature's
    defaults, and keywords given explicitly (even one equal to its default) replace both."""
    signature = inspect.signature(fn)
    names = tuple(signature.parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        if kwargs.get("config") is None:
            return fn(*args, **kwargs)
        arguments = signature.bind(*args, **kwargs).arguments
        overrides = arguments.pop("config").to_dataset_kwargs()
        unknown = sorted(set(overrides) - set(names))
        if unknown:
            raise unknown_keyword("make_dataset (from config)", unknown[0], names)
        source = overrides.pop("source", None)
        arguments = {**overrides, **arguments}
        if arguments.get("source") is None:
            arguments["source"] = source
        return fn(**arguments)

    return wrapper


@checked_keywords
@_applies_config
# <generated: make_dataset> from options.DATASET_OPTIONS: python -m object_input.docgen.options
def make_dataset(
    source: Any = None,
    *,
    config: Any = None,
    format: str | None = None,
    batch_size: int | None = 32,
    augment: Sequence[Any] | Augmentation = (),
    image_size: Sequence[int] | None = None,
    pad_image_size: Sequence[int] | None = None,
    max_boxes: int | None = None,
    batching: str = "dynamic",
    box_overflow: str = "error",
    drop_remainder: bool | None = None,
    group_by_aspect_ratio: bool = False,
    shuffle: bool | None = None,
    shuffle_buffer_size: int = 2048,
    num_epochs: int | None = 1,
    seed: int | None = None,
    label_map: str | os.PathLike | Mapping[str, int] | None = None,
    masks: str | None = None,
    num_keypoints: int = 0,
    keras: bool | str = False,
    bounding_box_format: str | None = None,
    output_dtype: str | None = None,
    trailing_steps: str = "batched",
    num_parallel_calls: int = AUTOTUNE,
    prefetch: int = AUTOTUNE,
    deterministic: bool = True,
    on_error: str = "raise",
    empty_images: str = "keep",
    reading: ReadOptions | Mapping[str, Any] | None = None,
    decoding: DecodeOptions | Mapping[str, Any] | None = None,
    service: ServiceOptions | str | None = None,
) -> tf.data.Dataset:
    """A batched, prefetched dataset of decoded, augmented examples.

    Every example gets a stateless seed derived from the pipeline seed (without one, a base each
    iterator draws afresh), the iterator's iteration number and its position in the stream, so
    augmentation does not depend on thread timing;
    the shuffles are keyed by the seed and iteration number too (:mod:`object_input.iterations`,
    and :class:`object_input.SyncEpochs` for Keras).

    Args:
      source: a path, glob, directory or list of them (format from ``format`` or the suffix), a
        source object from ``object_input.sources``, a ``tf.data.Dataset`` of feature dicts, or a
        Hugging Face ``datasets.Dataset`` / ``IterableDataset`` (read by
        ``object_input.sources.HuggingFace`` with its defaults).
      config: a ``PipelineConfig`` (e.g. ``load_pipeline_config``): the values it sets replace the
        defaults; keywords given here replace both.
      format: the format of path sources when their suffix does not tell
        (``object_input.sources.formats()`` lists them).
      batch_size: examples per batch; None yields single examples, unbatched.
      augment: steps in order: ``[("name", {params}), {"name": {params}}, "name", ...]``.
      image_size: resize every image to ``(height, width)``.
      pad_image_size: pad every image up to ``(height, width)`` instead (no resize).
      max_boxes: the most boxes an example may have (see ``box_overflow``).
      batching: "dynamic" pads to the batch maxima; "static" to ``max_boxes`` and a fixed image size
        (examples without boxes need no ``max_boxes``).
      box_overflow: more boxes than ``max_boxes``: "error", or "truncate" (counted in
        ``num_dropped_boxes``).
      drop_remainder: drop the last, smaller batch; None: only with ``batching='static'``, whose
        batches then have a known batch size too (pass False to keep every example).
      group_by_aspect_ratio: dynamic batching only: batch examples whose images have similar width /
        height together, so that tall and wide images pad each other less.
      shuffle: shuffle files and records; None: the source's default (on for training data).
      shuffle_buffer_size: records in the shuffle buffer.
      num_epochs: passes over the data; None repeats forever. Each pass is shuffled with a seed of
        its own: pass p is the same whatever num_epochs is.
      seed: with a seed, batches are identical run after run whatever the parallelism; without one,
        each iterator draws its own.
      label_map: class names to ids for detection records from path sources: a label map file or a
        dict; it names the data's classes too (``class_names``). None: a ``label_map.pbtxt`` beside
        TFRecord files (what the converters write) names the classes.
      masks: instance masks to decode from detection records of path sources.
      num_keypoints: keypoints per box to decode from detection records of path sources (0: none).
      keras: yield ``(images, targets)`` tuples for ``model.fit``: "detection" gives ``{"boxes",
        "labels"}`` for KerasHub detectors: boxes in ``bounding_box_format``, labels ``0..C-1``, the
        data's label map in id order (``dataset.class_names``; COCO's ids 1..90 become 0..79),
        padded rows labelled -1; "classification" gives ``labels``: the ``label`` field, else each
        image's one image-level class as such a label (``convert folders`` data); True gives
        ``{"boxes", "classes"}``, pipeline boxes and class ids as stored (padded rows class -1), or
        for examples without boxes the labels of "classification". A class id the label map lacks is
        an error naming the record; without a known label map a label is ``class id - 1``.
      bounding_box_format: the Keras 3 box format of ``keras="detection"`` targets: "xyxy", "yxyx",
        "xywh", "center_xywh", "center_yxhw" (pixels) or their "rel_" forms.
      output_dtype: None keeps uint8 until an op makes floats; "uint8", "float32", "bfloat16".
      trailing_steps: where the steps at the end of ``augment`` run when images are resized to
        ``image_size`` and batched: "batched" (the trailing steps with a batched form, which
        docs/ops.md lists: flips, rotation, affine, blur, sharpness, colour, RandAugment, ...: drawn
        and moving the annotations per example, their pixels changed after the resize, on the batch,
        compiled with XLA), "exact" (every step in order, per example, before the resize), or
        "device": those steps' pixel work waits for the training device: each example carries
        ``device_parameters`` for ``object_input.keras.layers.DeviceAugmentation`` (or
        ``object_input.apply_device_stage``). See docs/performance.md.
      num_parallel_calls: parallelism of the per-example map.
      prefetch: batches prefetched.
      deterministic: keep the element order independent of thread timing (the per-example map keeps
        its order either way).
      on_error: a bad record or unreadable file: "raise" stops with an error naming the file,
        record, source id and field (a TensorFlow op failing on a record, e.g. a truncated JPEG,
        names the record); "skip" drops that record alone (before batching) and counts it by reason:
        ``object_input.stats(dataset)`` reads the counts (docs/reliability.md).
      empty_images: images without boxes: "keep", or "drop" (counted as ``empty``).
      reading: ``ReadOptions`` or a dict of its fields (sharding, interleave, compression).
      decoding: ``DecodeOptions`` or a dict of its fields (channels, extra features, ...).
      service: a tf.data service address or ``ServiceOptions``: decoding, augmentation and batching
        then run on its workers.
    """
    # </generated: make_dataset>
    options = dict(locals())
    del options["config"]  # applied by _applies_config
    return _build_dataset(DatasetOptions(**options))


class _DatasetChecks:
    """The checks of ``DatasetOptions``: each option's declared check, then the combinations."""

    def __post_init__(self) -> None:
        if self.source is None:
            raise ValueError(
                "make_dataset needs a source: a path, glob, directory, list of them, a source "
                "object from object_input.sources (TFDS, HuggingFace, ...), a tf.data.Dataset or a "
                "Hugging Face dataset"
            )
        for option in _CHECKED:
            setattr(self, option.name, option.check(getattr(self, option.name)))
        if self.trailing_steps == "device" and (self.image_size is None or self.batch_size is None):
            raise ValueError(
                "trailing_steps='device' needs image_size and batch_size: the device stage "
                "runs on batches of one image size"
            )
        if self.image_size is not None and self.pad_image_size is not None:
            raise ValueError("give image_size (resize) or pad_image_size (pad), not both")
        # max_boxes, needed by static batching when the examples have boxes, is checked when
        # the batches are built: classification examples have none.
        if self.batching == "static" and self.image_size is None and self.pad_image_size is None:
            raise ValueError(
                "batching='static' needs image_size (resize to it) or pad_image_size "
                "(pad up to it) so that every batch has one shape"
            )
        if isinstance(self.augment, (str, Mapping)) and not isinstance(self.augment, Augmentation):
            raise TypeError(
                f"augment must be a list of steps, got {type(self.augment).__name__} "
                f"{self.augment!r}; for one step write augment=[{self.augment!r}]"
            )
        if not isinstance(self.augment, Augmentation):
            self.augment = Augmentation(self.augment or ())
        if self.drop_remainder is None:
            self.drop_remainder = self.batching == "static"
        if self.group_by_aspect_ratio and self.batching != "dynamic":
            raise ValueError(
                "group_by_aspect_ratio needs batching='dynamic': static batches have one size"
            )
        keras_layout.check_options(self.keras, self.bounding_box_format)
        if self.service is not None and (self.on_error, self.empty_images) != ("raise", "keep"):
            raise ValueError(
                "on_error='skip' and empty_images='drop' count what they drop in this "
                "process's variables; they cannot run on tf.data service workers"
            )
        path_options = PathOptions(
            reading=self.reading,
            decoding=self.decoding,
            label_map=self.label_map,
            masks=self.masks,
            num_keypoints=self.num_keypoints,
        )
        self.source = as_source(self.source, self.format, path_options)
        if self.service is not None and not self.source.serializable:
            raise ValueError(
                f"a {type(self.source).__name__} source runs in this Python process and cannot "
                "run on tf.data service workers; drop service= or write the data to files first"
            )
        if self.shuffle is None:
            self.shuffle = self.source.shuffle_by_default


# The declared options with a check of their own.
_CHECKED = tuple(o for o in DATASET_OPTIONS if o.rule is not None or o.convert is not None)

#: ``make_dataset``'s arguments after defaults and a config are applied, checked: a field for
#: each declared parameter but ``config``.
DatasetOptions = dataclasses.make_dataclass(
    "DatasetOptions",
    [(option.name, option.hint) for option in DATASET_OPTIONS if option.name != "config"],
    bases=(_DatasetChecks,),
    namespace={
        "__module__": __name__,
        "__doc__": "``make_dataset``'s arguments after defaults and a config are applied, "
        "checked: a field for each parameter declared in ``options.DATASET_OPTIONS`` but "
        "``config``.",
    },
)


# Every function tf.data traces in here is written for graphs: AutoGraph would only convert it,
# which cost a fresh process about 0.7 s before its first batch (docs/performance.md). Functions
# traced while this runs are not converted.
@tf.autograph.experimental.do_not_convert
def _build_dataset(opts: DatasetOptions) -> tf.data.Dataset:
    """The stages: read (from the iterator's place) → example seeds → decode and augment under
    the error policy's catch → partners for combining steps → batch → trailing steps' pixels on
    the batch → the place after each batch → Keras layout → options, service → prefetch → the
    place recorded as each batch is handed out; with the epoch audit (service, no place), the
    audit and then the Keras layout follow the service. The dataset carries the data's
    ``class_names`` (:func:`keras_layout.class_names`)."""
    # Counting and iteration numbers need variables in this process: not on service workers.
    local = opts.service is None
    policy = ErrorPolicy.build(
        opts.on_error,
        opts.empty_images,
        source_marks=opts.source.marks_read_errors,
        counting=local,
        trusted=opts.source.verified,
    )
    context = ReadContext(
        reading=opts.reading,
        shuffle=opts.shuffle,
        seed=opts.seed,
        deterministic=opts.deterministic,
        marks=policy.reader_marks,
        state=opts.source.reader_state(),
    )

    def read_shard(num_shards: int, shard_index: int) -> place.Read:
        reading = dataclasses.replace(
            opts.reading, num_shards=num_shards, shard_index=shard_index, input_context=None
        )
        return functools.partial(
            _read,
            opts.source,
            dataclasses.replace(context, reading=reading),
            shuffle_buffer_size=opts.shuffle_buffer_size if opts.shuffle else None,
        )

    read = read_shard(opts.reading.num_shards, opts.reading.shard_index)
    progress = None
    if local:
        # Re-sharding reads the iteration again as the old shards did (Progress.resume_shards).
        reads = iterations.ShardReads(
            read_shard,
            opts.seed,
            passes=opts.num_epochs,
            reproducible=opts.deterministic and (opts.seed is not None or not opts.shuffle),
        )
        progress = iterations.Progress(opts.reading.num_shards, opts.reading.shard_index, reads)
    # Tunable parameters as variables: a rebuild with one changed runs the kept functions (not
    # on service workers). A device stage here only draws; the model's runs the user's steps.
    steps = per_example.plan(
        opts.source,
        opts.augment.tuned() if local else opts.augment,
        policy,
        seed=opts.seed,
        shard_index=opts.reading.shard_index,
        image_size=opts.image_size,
        pad_image_size=opts.pad_image_size,
        batched=opts.batch_size is not None,
        trailing_steps=opts.trailing_steps,
        output_dtype=opts.output_dtype,
        max_boxes=opts.max_boxes,
        box_overflow=opts.box_overflow,
        tracks_place=progress is not None,
    )
    records = iterations.seeded_records(
        read, opts.seed, progress, passes=opts.num_epochs, replayed=_replayed(opts, steps)
    )
    dataset = policy.catch(records, steps.process, num_parallel_calls=opts.num_parallel_calls)
    if steps.combining:
        dataset = partners.combine(
            dataset,
            steps.augment,
            steps.finish_combined,
            num_parallel_calls=opts.num_parallel_calls,
            deterministic=opts.deterministic,
        )
    if progress is not None and opts.group_by_aspect_ratio and opts.batch_size is not None:
        dataset = place.with_restarts(
            dataset, opts.batch_size, batching.aspect_bucket, len(batching.ASPECT_BOUNDARIES) + 1
        )
    dataset = _batch(
        dataset,
        opts.batch_size,
        mode=opts.batching,
        max_boxes=opts.max_boxes,
        image_size=opts.image_size or opts.pad_image_size,
        drop_remainder=opts.drop_remainder,
        group_by_aspect_ratio=opts.group_by_aspect_ratio,
    )
    dataset = policy.count_passed(dataset, batched=opts.batch_size is not None)
    dataset = _batch_stage(dataset, steps, opts.num_parallel_calls, opts.deterministic)
    delivery_audit = _audit(opts)
    classes = keras_layout.data_classes(opts.source, dataset.element_spec, opts.keras)
    layout = functools.partial(
        _keras_layout,
        keras=opts.keras,
        box_format=opts.bounding_box_format,
        classes=classes,
        num_parallel_calls=opts.num_parallel_calls,
    )
    if progress is not None:
        # Each batch carries the place after it up to the consumer, where it is recorded.
        dataset = place.end_marker(layout(place.track(dataset, progress.read_start), placed=True))
    elif delivery_audit is None:
        dataset = layout(dataset)
    dataset = _deliver(dataset, opts.deterministic, opts.service)
    if delivery_audit is not None:
        # The record ids arrive with the batches; the Keras layout drops them after the count.
        dataset = layout(delivery_audit.track(dataset))
    dataset = dataset.prefetch(opts.prefetch)
    if progress is not None:
        dataset = iterations.attach(place.record(dataset, progress.write), progress)
    if delivery_audit is not None:
        dataset = delivery_audit.attach(dataset)
    return keras_layout.attach_classes(policy.attach(dataset), classes)


def _replayed(opts: DatasetOptions, steps: per_example.ExampleSteps) -> str:
    """What a restored iterator does with the records it reads again (see
    :func:`iterations.seeded_records`): partner groups re-form whole and drop them after;
    aspect-ratio buckets alone, the reader drops them; else none are read again."""
    if steps.combining:
        return iterations.FLAG_REPLAYED
    if opts.group_by_aspect_ratio:
        return iterations.DROP_REPLAYED
    return iterations.NO_REPLAY


def _audit(opts: DatasetOptions) -> DeliveryAudit | None:
    """The epoch audit when ``service`` asks for it: records per pass = records × epochs."""
    if opts.service is None or not opts.service.audit:
        return None
    records = opts.source.known_records
    if records is None or opts.num_epochs is None:
        raise ValueError(
            "ServiceOptions(audit=True) needs the number of records a pass holds: finite "
            "num_epochs and files whose record count is known (verify them first: "
            "object-input inspect --verify FILES)"
        )
    return DeliveryAudit(records * opts.num_epochs)


def _read(
    source: Source,
    context: ReadContext,
    seed: int | tf.Tensor | None,
    shuffled: bool = True,
    *,
    shuffle_buffer_size: int | None,
) -> tf.data.Dataset:
    """One pass over the source's records, read with ``seed`` and, when ``shuffled``, shuffled
    through a buffer of ``shuffle_buffer_size`` (None: not shuffled);
    :func:`iterations.seeded_records` strings the passes of an iteration together, each with
    its own seed."""
    context = dataclasses.replace(context, seed=seed)
    records = source.records(context)
    if shuffled and shuffle_buffer_size is not None:
        records = context.shuffled(records, shuffle_buffer_size)
    return records


def _batch(
    dataset: tf.data.Dataset,
    batch_size: int | None,
    *,
    mode: str,
    max_boxes: int | None,
    image_size: tuple[int, int] | None,
    drop_remainder: bool,
    group_by_aspect_ratio: bool,
) -> tf.data.Dataset:
    """Examples padded into batches of ``batch_size`` (none when it is None)."""
    if batch_size is None:
        return dataset
    return batching.batch_features(
        dataset,
        batch_size,
        mode=mode,
        max_boxes=max_boxes,
        image_size=image_size,
        drop_remainder=drop_remainder,
        group_by_aspect_ratio=group_by_aspect_ratio,
    )


def _batch_stage(
    dataset: tf.data.Dataset,
    steps: per_example.ExampleSteps,
    num_parallel_calls: int,
    deterministic: bool,
) -> tf.data.Dataset:
    """The trailing steps' pixels on whole batches, compiled (``trailing_steps="batched"``)."""
    if steps.trailing is None or steps.on_device:
        return dataset
    if fields.DEVICE_PARAMETERS not in dataset.element_spec:
        return dataset  # the image's channels were unknown: the steps ran per example
    return map_on_cpu(
        dataset,
        functools.partial(
            per_example.batch_stage, stage=steps.trailing, output_dtype=steps.output_dtype
        ),
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )


def _keras_layout(
    dataset: tf.data.Dataset,
    keras: bool | str,
    box_format: str | None,
    classes: keras_layout.LabelSpace | None,
    num_parallel_calls: int,
    placed: bool = False,
) -> tf.data.Dataset:
    """``(images, targets)`` tuples for ``model.fit`` when ``keras`` asks for them, labels
    numbered by ``classes``; of ``(features, place)`` pairs when ``placed``, the place kept."""
    to_keras = keras_layout.keras_output(keras, box_format, classes)
    if to_keras is None:
        return dataset
    if placed:
        return map_on_cpu(
            dataset,
            lambda features, where: (to_keras(features), where),
            num_parallel_calls=num_parallel_calls,
        )
    return map_on_cpu(dataset, to_keras, num_parallel_calls=num_parallel_calls)


def _deliver(
    dataset: tf.data.Dataset, deterministic: bool, service: ServiceOptions | None
) -> tf.data.Dataset:
    """The dataset's options, and the tf.data service when asked."""
    options = tf.data.Options()
    options.deterministic = deterministic
    # tf.data's static rewrites (fusing shuffle and repeat, parallelizing the small maps, ...)
    # gain nothing measurable here but cost a rewrite of the whole graph when an iterator
    # starts, and the fused shuffle fills its buffer across epochs before the first batch
    # (docs/performance.md, "Time to first batch"); a caller's with_options may turn them on.
    options.experimental_optimization.apply_default_optimizations = False
    # The counter's variables and the label-map tables are state outside the iterator: a
    # tf.train.Checkpoint holds the counter next to the iterator (docs/reliability.md).
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    dataset = dataset.with_options(options)
    if service is not None:
        if service.lost_worker_timeout_s is not None:
            # Outside the graph: a thread of this process that ends a dead worker's tasks at
            # the dispatcher, the only way a pass waiting for them can end.
            from object_input.scale_out import lost_workers

            lost_workers.watch(service.address, service.lost_worker_timeout_s)
        # Everything above runs on the tf.data service workers; this process only receives batches.
        dataset = dataset.apply(
            tf.data.experimental.service.distribute(
                service.mode, service.address, job_name=service.job_name
            )
        )
    return dataset
