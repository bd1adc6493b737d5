"""Caffe SSD LMDB databases of ``AnnotatedDatum`` records, as ``create_annoset.py`` writes them.

An ``AnnotatedDatum`` is a ``Datum`` (the image, encoded or raw) and annotation groups: each group
one class (``group_label``, 1-based: the SSD label map gives 0 to the background) and its
annotations, each an ``instance_id`` and a ``NormalizedBBox`` (``xmin ymin xmax ymax`` on [0, 1],
``difficult``). Reading, order, shuffling and sharding are :class:`CaffeLMDB`'s; the nested
messages are parsed in the graph with ``tf.io.decode_proto``, one level at a time.
"""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.reliability import errors
from object_input.sources import _caffe_proto as caffe_proto
from object_input.sources import _samples as samples
from object_input.sources._resolve import PathOptions, register_format
from object_input.sources.caffe_lmdb import AnnotatedDatabaseError, CaffeLMDB, sample_datum

# (message, [(field, dtype)]) of each level, as caffe.proto of the SSD fork numbers them.
_ANNOTATED = ("datum", tf.string), ("type", tf.int32), ("annotation_group", tf.string)
_GROUP = ("group_label", tf.int32), ("annotation", tf.string)
_ANNOTATION = ("instance_id", tf.int32), ("bbox", tf.string)
_BBOX = (
    *((name, tf.float32) for name in ("ymin", "xmin", "ymax", "xmax")),
    ("difficult", tf.bool),
)


def _decode(messages: tf.Tensor, name: str, spec) -> tuple[tf.Tensor, list[tf.Tensor]]:
    """``decode_proto`` of a vector of serialized ``caffe.<name>`` messages."""
    # decode_proto refuses an empty vector (a record without groups): decode one more, empty.
    sizes, values = tf.io.decode_proto(
        tf.concat([messages, [""]], 0),
        f"caffe.{name}",
        [field for field, _ in spec],
        [dtype for _, dtype in spec],
        descriptor_source=caffe_proto.DESCRIPTOR_SOURCE,
    )
    return sizes[:-1], [value[:-1] for value in values]


def _optional(values: tf.Tensor, default: Any) -> tf.Tensor:
    """Per message, an optional field's value (``values`` ``[M, 0 or 1]``) or ``default``."""
    fill = tf.fill([tf.shape(values)[0], 1], tf.constant(default, values.dtype))
    return tf.concat([values, fill], axis=1)[:, 0]


class CaffeAnnotatedLMDB(CaffeLMDB):
    """A Caffe SSD LMDB of ``AnnotatedDatum`` records (``create_annoset.py``, ``convert_annoset``).

    Yields :class:`CaffeLMDB`'s image fields (``IMAGE``, ``IMAGE_SHAPE``, ``CHANNEL_ORDER``,
    ``KEY``, ``RECORD_ID``) and the boxes of every annotation group in record order: ``BOXES``
    (normalized ``[ymin, xmin, ymax, xmax]``, the stored floats exactly), ``CLASSES`` (the group's
    ``group_label``), ``DIFFICULT`` and ``TRACK_IDS`` (the annotation's ``instance_id``, numbered
    from 0 within each group by ``create_annoset``). The Datum's own ``label`` (-1 from
    ``create_annoset``) is not yielded. A record that is not an ``AnnotatedDatum``, whose
    annotation type is not ``BBOX``, or whose boxes are out of order, outside [0, 1] or not
    finite, or whose ``group_label`` is below 1, is flagged naming its key and the field, to raise
    or skip (``on_error="skip"``) and count like any source's.

    Args: as :class:`CaffeLMDB`.
    """

    message = "AnnotatedDatum"

    @classmethod
    def _sample_record(cls, index: int, spoiled: bool = False) -> bytes:
        """Record ``index`` of a sample: its Datum and one box, ``spoiled`` out of order."""
        message = caffe_proto.message_class
        ymin, xmin, ymax, xmax = samples.BOX
        if spoiled:
            ymin, ymax = ymax, ymin
        box = message("NormalizedBBox")(xmin=xmin, ymin=ymin, xmax=xmax, ymax=ymax)
        group = message("AnnotationGroup")(
            group_label=1, annotation=[message("Annotation")(instance_id=0, bbox=box)]
        )
        annotated = message("AnnotatedDatum")(
            datum=sample_datum(index), type=0, annotation_group=[group]
        )
        return annotated.SerializeToString()

    @staticmethod
    def _datum_of(message: Any) -> Any:
        return message.datum

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        """The record's image and boxes; a bad record is flagged (``ERROR``, ``ERROR_DETAIL``
        naming its key and field) with placeholder values, for the pipeline to raise or skip."""
        key, value, parsed = payload
        checks = errors.RecordChecks(record_id)
        checks.add(parsed, "undecodable", "the value is not a Caffe AnnotatedDatum message")
        sizes, (datum, kind, groups) = _decode(tf.reshape(value, [1]), "AnnotatedDatum", _ANNOTATED)
        out = self._datum_fields(record_id, key, _optional(datum, b"")[0], checks)
        del out[fields.LABEL]
        kind = _optional(kind, 0)[0]
        checks.add(
            tf.equal(kind, 0), "undecodable", "field type =", kind, "is not BBOX (0), the one read"
        )
        out.update(_boxes(groups[0, : sizes[0, 2]], checks))
        return checks.flag(out)

    def __repr__(self) -> str:
        return f"CaffeAnnotatedLMDB({self.path!r}, {self.num_records} records)"


def _boxes(groups: tf.Tensor, checks: errors.RecordChecks) -> dict[str, tf.Tensor]:
    """The boxes of serialized ``AnnotationGroup`` messages, group after group, checked."""
    group_sizes, (labels, annotations) = _decode(groups, "AnnotationGroup", _GROUP)
    present = tf.sequence_mask(group_sizes[:, 1], tf.shape(annotations)[1])
    per_box_label = tf.broadcast_to(_optional(labels, 0)[:, tf.newaxis], tf.shape(present))
    classes = tf.boolean_mask(per_box_label, present)
    _, (instance_ids, boxes) = _decode(
        tf.boolean_mask(annotations, present), "Annotation", _ANNOTATION
    )
    box_sizes, coordinates = _decode(_optional(boxes, b""), "NormalizedBBox", _BBOX)
    has_box = tf.reduce_all(box_sizes[:, :4] > 0, axis=1)
    box = tf.stack([_optional(c, float("nan")) for c in coordinates[:4]], axis=1)
    ymin, xmin, ymax, xmax = tf.unstack(box, num=4, axis=1)
    checks.add(
        tf.reduce_all(has_box),
        "box_lists",
        "an annotation's bbox lacks one of xmin, ymin, xmax, ymax",
    )
    finite = tf.reduce_all(tf.math.is_finite(box))
    checks.add(
        finite | ~tf.reduce_all(has_box), "box_not_finite", "a bbox coordinate is NaN or inf"
    )
    checks.add(
        tf.reduce_all((xmin <= xmax) & (ymin <= ymax)),
        "box_order",
        "a bbox has xmin > xmax or ymin > ymax: (ymin, xmin, ymax, xmax) =",
        lambda: box,
    )
    checks.add(
        tf.reduce_all((box >= 0.0) & (box <= 1.0)) | ~finite,
        "box_out_of_range",
        "a bbox coordinate is outside [0, 1]: (ymin, xmin, ymax, xmax) =",
        lambda: box,
    )
    checks.add(
        tf.reduce_all(classes >= 1),
        "class_range",
        "annotation_group.group_label =",
        lambda: classes,
        "must be >= 1 (0 is the SSD label map's background)",
    )
    return {
        fields.BOXES: tf.where(tf.math.is_finite(box), box, 0.0),
        fields.CLASSES: classes,
        fields.DIFFICULT: _optional(coordinates[4], False),
        fields.TRACK_IDS: _optional(instance_ids, 0),
    }


def _from_paths(files: list[str], options: PathOptions) -> CaffeLMDB:
    del options
    folders = sorted({os.path.dirname(f) for f in files})
    if len(folders) != 1:
        raise ValueError(f"a Caffe LMDB source is one database folder, got files in {folders}")
    try:
        return CaffeLMDB(folders[0])
    except AnnotatedDatabaseError:
        return CaffeAnnotatedLMDB(folders[0])


# The format is registered here, above both readers: a database folder is read by the one its
# records are for (a plain Datum database, or an AnnotatedDatum one).
register_format("caffe_lmdb", ("data.mdb", "lock.mdb"), _from_paths)
