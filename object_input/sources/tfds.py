"""TensorFlow Datasets (TFDS): a prepared dataset's examples as feature dicts.

Needs ``tensorflow-datasets`` (``pip install object-input[tfds]``), imported only when a
:class:`TFDS` source is made.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from object_input import box_formats, fields
from object_input.decoders import deferred_image
from object_input.decoders.image_files import (
    PLACEHOLDER_PNG,
    header_size,
    image_magic,
    looks_like_image,
)
from object_input.reliability import errors
from object_input.sources import _hub_layout as hub_layout
from object_input.sources import _tfds_layout as tfds_layout
from object_input.sources._base import ReadContext, Source
from object_input.sources._hub_layout import LayoutError
from object_input.sources.dataset import detection_checks, stand_ins
from object_input.tracing.maps import map_on_cpu

INSTALL_HINT = "sources.TFDS needs tensorflow-datasets: pip install object-input[tfds]"

# Field dtypes the pipeline expects, whatever TFDS stores.
_DTYPES = {
    fields.CLASSES: tf.int32,
    fields.IMAGE_CLASSES: tf.int32,
    fields.LABEL: tf.int32,
    fields.COARSE_LABEL: tf.int32,
    fields.TRACK_IDS: tf.int32,
    fields.IS_CROWD: tf.bool,
    fields.DIFFICULT: tf.bool,
    fields.GROUP_OF: tf.bool,
    fields.AREA: tf.float32,
    fields.WEIGHTS: tf.float32,
    fields.SOURCE_ID: tf.string,
    fields.FILENAME: tf.string,
    fields.KEY: tf.string,
}
# Fields that are lists even when the dataset stores one value (a single box's class).
_VECTORS = (
    fields.CLASSES,
    fields.IMAGE_CLASSES,
    fields.TRACK_IDS,
    fields.IS_CROWD,
    fields.DIFFICULT,
    fields.GROUP_OF,
    fields.AREA,
    fields.WEIGHTS,
)
# Class fields whose ClassLabel ids (0-based) become the pipeline's 1-based ids.
_ONE_BASED = (fields.CLASSES, fields.IMAGE_CLASSES)


def import_tfds() -> Any:
    """The ``tensorflow_datasets`` module; ImportError saying how to install it."""
    try:
        import tensorflow_datasets
    except ImportError as error:
        raise ImportError(INSTALL_HINT) from error
    return tensorflow_datasets


def _flatten(nested: Any, path: str = "") -> dict[str, Any]:
    """An example's nested dicts as ``{path: tensor}``, paths as in
    :func:`~object_input.sources._tfds_layout.feature_leaves`."""
    if not isinstance(nested, Mapping):
        return {path: nested}
    out: dict[str, Any] = {}
    for key, value in nested.items():
        out.update(_flatten(value, f"{path}/{key}" if path else key))
    return out


class TFDS(Source):
    """The examples of a prepared TensorFlow Datasets dataset (``tfds.load``'s data).

    Args:
      name_or_builder: a dataset name (``"coco/2017"``, ``"voc/2007"``, ``"mnist:3.*.*"``) or a
        ``tfds.core.DatasetBuilder``.
      split: the split to read, TFDS's syntax (``"train"``, ``"validation[:10%]"``).
      data_dir: where the prepared data is (TFDS's default when None); names only.
      fields: ``{field: feature path}``, the features to read and the fields they become
        (paths join nested keys with "/": ``{"image": "image", "boxes": "objects/bbox",
        "classes": "objects/label"}``); None: the mapping below. Given, it is the whole
        mapping.
      box_format: the format of the box feature (see :mod:`object_input.box_formats`); None: its
        ``BBoxFeature``'s own ``bbox_format``, else TFDS's normalized ``rel_yxyx``.
      defer_decode: when the steps start with flips and a crop, decode only the crop window
        (same pixels, less work; not for images TFDS stores as PNG).
      jpeg_dct_scaling: with ``defer_decode`` and an ``image_size``, decode a JPEG window at
        least twice the output size at 1/2, 1/4 or 1/8 scale (cheaper, not bit-identical).
      read_config: a ``tfds.ReadConfig`` for TFDS's other reading settings; the source sets
        its ``shuffle_seed``, ``add_tfds_id`` and interleave, so it must not set
        ``shuffle_seed`` or ``input_context``. None: TFDS's defaults without auto-caching (the
        pipeline reads each pass anew).
      download: download and prepare the dataset first, as ``tfds.load(download=True)``.

    Without ``fields``, the features map by TFDS's conventions, which the detection and
    classification datasets (coco, voc, kitti, wider_face, open_images_v4, oxford_iiit_pet,
    cifar10, cifar100, mnist) follow:

    - the top-level ``Image`` (``image`` when there are several) → ``image``;
    - the ``BBoxFeature`` of a ``Sequence`` of objects → ``boxes`` (TFDS boxes are normalized
      ``[ymin, xmin, ymax, xmax]``); the sequence's ``ClassLabel`` (``label``, ``type``,
      ``category`` or ``class`` when there are several) → ``classes`` as its id + 1, its names
      the :attr:`label_map`; without one (wider_face's faces) every box is class 1;
    - per-object ``is_crowd`` → ``is_crowd``, ``is_difficult`` → ``difficult``,
      ``is_group_of`` → ``group_of``, ``area`` → ``area``;
    - a top-level ``ClassLabel`` (``label`` when there are several) → ``label`` as stored
      (0-based, names in :attr:`label_names`), ``coarse_label`` → ``coarse_label``; voc's
      ``labels`` → ``image_classes`` (id + 1);
    - ``image/id`` or ``id`` → ``source_id``; ``image/filename`` (or ``file_name``) →
      ``filename``, and ``source_id`` when there is no id.

    Other features (coco's annotation ids, voc's ``is_truncated`` and ``pose``, a box outside
    a sequence such as oxford_iiit_pet's ``head_bbox``) are not read unless ``fields`` names
    them. A layout these rules cannot map (no top-level image, several box sequences, several
    class labels none of which has a conventional name) is a ValueError that lists the
    dataset's features and a ``fields`` mapping to start from. Under ``fields``, a ``ClassLabel``
    read as ``classes`` or ``image_classes`` becomes id + 1 and other class features are taken
    as 1-based; a field of another name read from the boxes' sequence must be registered per
    box (:func:`object_input.fields.register_per_box_field`) so that crops keep it aligned.

    Records are read with ``builder.as_dataset``, images left encoded (``SkipDecoding``) and
    decoded in :meth:`decode`. Record ids are ``"<dataset>/<split>:<tfds_id>"``, TFDS's id of
    the example (file and index). The pipeline's ``reading`` options apply: each of
    ``num_shards`` workers reads its own ``tfds.even_splits`` part of the split (whatever the
    number of files; a ``tf.distribute`` input context sets the shards), ``num_readers`` and
    ``block_length`` are the file interleave's, and the file order is shuffled with the
    iteration's seed (``shuffle_seed``), anew each epoch, so a seeded pipeline reads the same
    examples in the same order every time. Boxes and classes get the checks of
    :class:`~object_input.sources.Dataset` (finite, ordered, inside [0, 1]; one class per box
    in ``[1, 2**31)``; one value per box in each per-box field), a failure flagged naming the
    record and the feature.
    """

    def __init__(
        self,
        name_or_builder: Any,
        *,
        split: str,
        data_dir: str | None = None,
        fields: Mapping[str, str] | None = None,
        box_format: str | None = None,
        defer_decode: bool = True,
        jpeg_dct_scaling: bool = False,
        read_config: Any = None,
        download: bool = False,
    ):
        tfds = import_tfds()
        if isinstance(name_or_builder, str):
            self.builder = tfds.builder(name_or_builder, data_dir=data_dir)
        elif isinstance(name_or_builder, tfds.core.DatasetBuilder):
            if data_dir is not None:
                raise ValueError("data_dir names a dataset by name; a builder has its own")
            self.builder = name_or_builder
        else:
            raise TypeError(
                "TFDS needs a dataset name or a tfds.core.DatasetBuilder, got "
                f"{type(name_or_builder).__name__}"
            )
        if not isinstance(split, str) or not split:
            raise TypeError(f"TFDS needs split=, a split name such as 'train', got {split!r}")
        self.split = split
        self.name = self.builder.info.full_name
        if download:
            self.builder.download_and_prepare()
        self.read_config = _read_config(tfds, read_config)
        self.leaves = {
            leaf.path: leaf for leaf in tfds_layout.feature_leaves(tfds, self.builder.info.features)
        }
        self.fields = self._mapping(fields)
        self.box_format = self._box_format(box_format)
        self.defer_decode = defer_decode
        self.jpeg_dct_scaling = jpeg_dct_scaling
        # Top-level uint8 images stay encoded until decode (unread ones are never decoded).
        self.encoded = {
            leaf.path
            for leaf in self.leaves.values()
            if leaf.kind == "Image" and leaf.sequence is None and leaf.dtype == tf.uint8
        }
        self.decoders = {path: tfds.decode.SkipDecoding() for path in self.encoded}

    def _layout(self, reason: str) -> LayoutError:
        leaves = list(self.leaves.values())
        suggestion = tfds_layout.suggested_fields(leaves)
        return hub_layout.layout_error(
            f"TFDS dataset {self.name}",
            reason,
            (leaf.describe() for leaf in leaves),
            "{field: feature path} (nested keys joined by '/')",
            f"TFDS({self.name!r}, split={self.split!r}, fields={suggestion!r})",
        )

    def _mapping(self, given: Mapping[str, str] | None) -> dict[str, str]:
        if given is None:
            try:
                return tfds_layout.automatic_fields(list(self.leaves.values()))
            except LayoutError as error:
                raise self._layout(f"cannot map its features to fields: {error}") from None
        if not isinstance(given, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in given.items()
        ):
            raise TypeError(f"fields must be {{field: feature path}} of strings, got {given!r}")
        unknown = sorted(path for path in given.values() if path not in self.leaves)
        if unknown:
            raise self._layout(f"fields= names features it does not have: {unknown}")
        image = given.get(fields.IMAGE)
        if image is not None and self.leaves[image].kind != "Image":
            raise self._layout(f"fields= reads image from {image!r}, which is no Image")
        boxes = given.get(fields.BOXES)
        if boxes is not None:
            leaf = self.leaves[boxes]
            if (
                leaf.dtype is None
                or not leaf.dtype.is_floating
                or leaf.connector.shape[-1:] != (4,)
            ):
                raise self._layout(f"fields= reads boxes from {boxes!r}, which holds no float [4]")
            objects = {
                p for p, f in self.leaves.items() if f.sequence and f.sequence == leaf.sequence
            }
            unaligned = sorted(
                name
                for name, path in given.items()
                if path in objects and not fields.is_per_box(name)
            )
            if unaligned:
                raise ValueError(
                    f"fields {unaligned} hold one value per box: register them with "
                    "object_input.fields.register_per_box_field first, so that the steps that "
                    "drop or reorder boxes keep them aligned"
                )
        return dict(given)

    def _box_format(self, box_format: str | None) -> str | None:
        path = self.fields.get(fields.BOXES)
        if path is None:
            return None
        if box_format is None:
            declared = getattr(self.leaves[path].connector, "bbox_format", None)
            box_format = getattr(declared, "value", declared) or box_formats.INTERNAL_FORMAT
        box_format = box_formats.canonical_format(box_format)
        if not box_formats.is_relative(box_format) and fields.IMAGE not in self.fields:
            raise ValueError(f"boxes in {box_format!r} (pixels) need the image to normalize them")
        return box_format

    @property
    def label_map(self) -> dict[str, int] | None:
        """``{class name: id}`` of ``classes`` (ClassLabel id + 1), else of ``image_classes``;
        None without names."""
        path = self._class_path
        if path is None:
            boxes = self.fields.get(fields.BOXES)
            # One class for boxes without classes, named after their sequence ("faces").
            return None if boxes is None else {self.leaves[boxes].sequence or boxes: 1}
        names = self._names(path)
        return None if names is None else {name: i + 1 for i, name in enumerate(names)}

    @property
    def label_map_origin(self) -> str:
        """:attr:`label_map` as messages name it."""
        path = self._class_path or self.fields.get(fields.BOXES)
        return f"label map of feature {path!r} of TFDS {self.name}"

    @property
    def _class_path(self) -> str | None:
        """The feature of the class ids: ``classes``, else ``image_classes``."""
        return self.fields.get(fields.CLASSES, self.fields.get(fields.IMAGE_CLASSES))

    @property
    def label_names(self) -> tuple[str, ...] | None:
        """The names of ``label``'s classes, by id (0-based, as stored); None without names."""
        path = self.fields.get(fields.LABEL)
        return None if path is None else self._names(path)

    def _names(self, path: str) -> tuple[str, ...] | None:
        leaf = self.leaves[path]
        return tuple(leaf.connector.names) if leaf.kind == "ClassLabel" else None

    @property
    def channels(self) -> int:
        """Channels of the image feature (decoded to this many)."""
        return int(self.leaves[self.fields[fields.IMAGE]].connector.shape[-1])

    def records(self, context: ReadContext) -> tf.data.Dataset:
        tfds = import_tfds()
        reading = context.reading
        split = self.split
        if reading.num_shards > 1:
            split = tfds.even_splits(split, reading.num_shards)[reading.shard_index]
        shuffle_files = context.shuffle and reading.file_shuffle
        read_config = self.read_config.replace(
            add_tfds_id=True,
            shuffle_seed=context.seed if shuffle_files else None,
            interleave_cycle_length=reading.num_readers,
            interleave_block_length=reading.block_length,
        )
        # TFDS shuffles the files with tf.data: the iteration's seed alone keys their order.
        with context.seed_alone():
            examples = self.builder.as_dataset(
                split=split,
                decoders=self.decoders,
                read_config=read_config,
                shuffle_files=shuffle_files,
            )
        prefix = f"{self.name}/{self.split}:"
        wanted = self.fields

        def record(example: dict[str, Any]) -> tuple:
            flat = _flatten(example)
            payload = {name: flat[path] for name, path in wanted.items()}
            record_id = tf.strings.join([prefix, example["tfds_id"]])
            return (record_id, payload, *context.unmarked())

        return map_on_cpu(examples, record)

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        values = dict(payload)
        features: dict[str, tf.Tensor] = {fields.RECORD_ID: record_id}
        size = None
        # Whether each encoded image's bytes start like an image: others are flagged.
        is_image: dict[str, tf.Tensor] = {}
        if fields.IMAGE in values:
            encoded = values.pop(fields.IMAGE)
            if self.fields[fields.IMAGE] in self.encoded:
                magic = image_magic(encoded)
                is_image[fields.IMAGE] = tf.reduce_any(magic)
            if defer_image:
                size = self._header_size(encoded, magic)
                features[fields.ENCODED_IMAGE] = encoded
                features[fields.IMAGE_SHAPE] = size
            else:
                image = self._image(fields.IMAGE, encoded)
                size = tf.shape(image)[:2]
                features[fields.IMAGE] = image
                features[fields.IMAGE_SHAPE] = size
        for name, value in values.items():
            if self.fields[name] in self.encoded:
                is_image[name] = looks_like_image(value)
            features[name] = self._convert(name, value, size)
        if fields.BOXES in features and fields.CLASSES not in features:
            features[fields.CLASSES] = tf.ones(tf.shape(features[fields.BOXES])[:1], tf.int32)
        checks = self._checks(features, is_image)
        if not checks.items:
            return _checked_example(features)
        stand_in = stand_ins(features)
        if fields.ENCODED_IMAGE in features:
            stand_in[fields.ENCODED_IMAGE] = tf.constant(PLACEHOLDER_PNG)
            stand_in[fields.IMAGE_SHAPE] = tf.ones([2], tf.int32)
        return errors.guarded(checks, errors.FLAG, _checked_example, features, stand_in)

    def _image(self, name: str, value: tf.Tensor) -> tf.Tensor:
        """The pixels of image field ``name``: decoded here when TFDS left them encoded."""
        leaf = self.leaves[self.fields[name]]
        if leaf.path not in self.encoded:
            return value
        shape = leaf.connector.shape
        # Bytes that are no image are flagged (see _checks); their stand-in decodes to zeros.
        return tf.ensure_shape(
            tf.cond(
                looks_like_image(value),
                lambda: tf.io.decode_image(value, channels=shape[-1], expand_animations=False),
                lambda: tf.zeros([1 if d is None else d for d in shape], tf.uint8),
            ),
            shape,
        )

    def _header_size(self, encoded: tf.Tensor, magic: tf.Tensor) -> tf.Tensor:
        """(height, width) of an encoded image: the feature's own when fixed (mnist, cifar),
        else as the TFRecord decoder reads it (:func:`header_size`)."""
        height, width = self.leaves[self.fields[fields.IMAGE]].connector.shape[:2]
        if height is not None and width is not None:
            return tf.constant([height, width], tf.int32)
        return header_size(encoded, magic, lambda e: self._image(fields.IMAGE, e))

    def _convert(self, name: str, value: tf.Tensor, size: tf.Tensor | None) -> tf.Tensor:
        """A field's value as the pipeline holds it."""
        leaf = self.leaves[self.fields[name]]
        if leaf.path in self.encoded:
            return self._image(name, value)
        if name == fields.BOXES:
            boxes = tf.reshape(tf.cast(value, tf.float32), [-1, 4])
            return box_formats.convert(boxes, self.box_format, box_formats.INTERNAL_FORMAT, size)
        dtype = _DTYPES.get(name)
        if dtype == tf.string and value.dtype != tf.string:
            value = tf.strings.as_string(value)
        elif dtype == tf.bool and value.dtype != tf.bool:
            # open_images_v4's int8 flags: -1 means unknown, not set.
            value = value > 0
        elif dtype is not None:
            value = tf.cast(value, dtype)
        if name in _VECTORS:
            value = tf.reshape(value, [-1])
        if name in _ONE_BASED and leaf.kind == "ClassLabel":
            value += 1
        return value

    def _checks(
        self, features: dict[str, tf.Tensor], is_image: Mapping[str, tf.Tensor]
    ) -> errors.RecordChecks:
        """The checks of :class:`~object_input.sources.Dataset`, naming the TFDS features, and
        whether each encoded image's bytes look like an image (``is_image``, by field)."""
        checks = detection_checks(features, self.fields)
        for name, looks_like in is_image.items():
            checks.add(
                looks_like,
                "not_an_image",
                f"feature {self.fields[name]} is not a JPEG, PNG, GIF or BMP image",
            )
        return checks

    @property
    def can_defer(self) -> bool:
        path = self.fields.get(fields.IMAGE)
        return (
            self.defer_decode
            and path in self.encoded
            and self.channels in (1, 3)
            and self.leaves[path].connector.encoding_format != "png"
        )

    def realize(
        self, features: dict[str, tf.Tensor], output_size: tuple[int, int] | None = None
    ) -> dict[str, tf.Tensor]:
        dct_min_size = output_size if self.jpeg_dct_scaling else None
        return deferred_image.realize(features, self.channels, dct_min_size=dct_min_size)

    def __repr__(self) -> str:
        return f"TFDS({self.name!r}, split={self.split!r}, fields {sorted(self.fields)})"


def _checked_example(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """A record's feature dict from its checked values: boxes clipped (float noise), a deferred
    image marked for :func:`~object_input.decoders.deferred_image.realize`."""
    out = dict(features)
    if fields.BOXES in out:
        out[fields.BOXES] = tf.clip_by_value(out[fields.BOXES], 0.0, 1.0)
    if fields.ENCODED_IMAGE in out:
        size = out.pop(fields.IMAGE_SHAPE)
        out = deferred_image.defer(out, out.pop(fields.ENCODED_IMAGE), size[0], size[1])
    return out


def _read_config(tfds: Any, given: Any) -> Any:
    if given is None:
        # The pipeline asks for the records anew each pass: a cache would be filled each time.
        return tfds.ReadConfig(try_autocache=False)
    if not isinstance(given, tfds.ReadConfig):
        raise TypeError(f"read_config must be a tfds.ReadConfig, got {type(given).__name__}")
    if given.input_context is not None or given.shuffle_seed is not None:
        raise ValueError(
            "read_config must not set input_context or shuffle_seed: make_dataset's "
            "reading=ReadOptions(num_shards=..., shard_index=... or input_context=...) shards, "
            "and its seed= keys the file shuffle"
        )
    return given

