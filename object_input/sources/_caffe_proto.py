"""Caffe's ``Datum`` and ``BlobProto`` messages, and the SSD fork's ``AnnotatedDatum``, described
in code (no Caffe install needed).

The schema is built as a ``FileDescriptorProto`` with the field numbers and types of
``caffe.proto``. :data:`DESCRIPTOR_SOURCE` hands it to ``tf.io.decode_proto`` (graph mode);
:func:`message_class` gives Python classes for parsing at the edges (a mean file, the first record
of a database).
"""

from __future__ import annotations

import functools
import os

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED

# name -> [(field, number, type, label, packed, type_name)], as in caffe.proto.
_MESSAGES = {
    "Datum": [
        ("channels", 1, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("height", 2, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("width", 3, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("data", 4, _F.TYPE_BYTES, _OPTIONAL, False, ""),
        ("label", 5, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("float_data", 6, _F.TYPE_FLOAT, _REPEATED, False, ""),
        ("encoded", 7, _F.TYPE_BOOL, _OPTIONAL, False, ""),
    ],
    "BlobShape": [("dim", 1, _F.TYPE_INT64, _REPEATED, True, "")],
    "BlobProto": [
        ("num", 1, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("channels", 2, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("height", 3, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("width", 4, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("data", 5, _F.TYPE_FLOAT, _REPEATED, True, ""),
        ("diff", 6, _F.TYPE_FLOAT, _REPEATED, True, ""),
        ("shape", 7, _F.TYPE_MESSAGE, _OPTIONAL, False, ".caffe.BlobShape"),
        ("double_data", 8, _F.TYPE_DOUBLE, _REPEATED, True, ""),
        ("double_diff", 9, _F.TYPE_DOUBLE, _REPEATED, True, ""),
    ],
    # The SSD fork's caffe.proto (create_annoset.py writes these).
    "NormalizedBBox": [
        ("xmin", 1, _F.TYPE_FLOAT, _OPTIONAL, False, ""),
        ("ymin", 2, _F.TYPE_FLOAT, _OPTIONAL, False, ""),
        ("xmax", 3, _F.TYPE_FLOAT, _OPTIONAL, False, ""),
        ("ymax", 4, _F.TYPE_FLOAT, _OPTIONAL, False, ""),
        ("label", 5, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("difficult", 6, _F.TYPE_BOOL, _OPTIONAL, False, ""),
        ("score", 7, _F.TYPE_FLOAT, _OPTIONAL, False, ""),
        ("size", 8, _F.TYPE_FLOAT, _OPTIONAL, False, ""),
    ],
    "Annotation": [
        ("instance_id", 1, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("bbox", 2, _F.TYPE_MESSAGE, _OPTIONAL, False, ".caffe.NormalizedBBox"),
    ],
    "AnnotationGroup": [
        ("group_label", 1, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("annotation", 2, _F.TYPE_MESSAGE, _REPEATED, False, ".caffe.Annotation"),
    ],
    # type is the enum AnnotationType (BBOX = 0): an int32 on the wire.
    "AnnotatedDatum": [
        ("datum", 1, _F.TYPE_MESSAGE, _OPTIONAL, False, ".caffe.Datum"),
        ("type", 2, _F.TYPE_INT32, _OPTIONAL, False, ""),
        ("annotation_group", 3, _F.TYPE_MESSAGE, _REPEATED, False, ".caffe.AnnotationGroup"),
    ],
}


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    # A file name of our own: it must not clash with a real caffe.proto loaded in the process.
    proto = descriptor_pb2.FileDescriptorProto(
        name="object_input/caffe.proto", package="caffe", syntax="proto2"
    )
    for message_name, message_fields in _MESSAGES.items():
        message = proto.message_type.add(name=message_name)
        for name, number, kind, label, packed, type_name in message_fields:
            field = message.field.add(name=name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name
            if packed:
                field.options.packed = True
    return proto


_FILE = _file_descriptor()

#: ``descriptor_source`` for ``tf.io.decode_proto``: the serialized FileDescriptorSet, inline.
DESCRIPTOR_SOURCE = b"bytes://" + descriptor_pb2.FileDescriptorSet(file=[_FILE]).SerializeToString()


@functools.cache
def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_FILE)
    return pool


@functools.cache
def message_class(name: str) -> type:
    """The Python message class of ``caffe.<name>`` (``Datum``, ``BlobShape``, ``BlobProto``,
    ``AnnotatedDatum``, ``AnnotationGroup``, ``Annotation``, ``NormalizedBBox``). One pool holds
    them all, so that ``AnnotatedDatum().datum`` is a ``message_class("Datum")``."""
    return message_factory.GetMessageClass(_pool().FindMessageTypeByName(f"caffe.{name}"))


def read_mean(path: str | os.PathLike) -> np.ndarray:
    """The float32 ``[C, H, W]`` mean image of a Caffe ``.binaryproto`` mean file.

    The shape comes from ``shape.dim`` (``[1, C, H, W]`` or ``[C, H, W]``) or the legacy
    ``num``/``channels``/``height``/``width``; values from ``data`` or ``double_data``. Raises
    ValueError naming the file when it is not such a blob.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    blob = message_class("BlobProto")()
    try:
        blob.ParseFromString(raw)
    except Exception as error:  # protobuf raises its own DecodeError subclasses
        raise ValueError(f"mean file {path}: not a Caffe BlobProto ({error})") from None
    if blob.HasField("shape"):
        dims = list(blob.shape.dim)
        if len(dims) == 4 and dims[0] == 1:
            dims = dims[1:]
    else:
        dims = [blob.channels, blob.height, blob.width]
        if blob.num not in (0, 1):
            raise ValueError(f"mean file {path}: num is {blob.num}; a mean image has num 1")
    values = np.asarray(blob.data if len(blob.data) else blob.double_data, np.float32)
    if len(dims) != 3 or min(dims) < 1:
        raise ValueError(
            f"mean file {path}: shape {dims} is not (channels, height, width) of a mean image"
        )
    if values.size != int(np.prod(dims)):
        raise ValueError(
            f"mean file {path}: {values.size} values for shape {dims} "
            f"({int(np.prod(dims))} expected in data or double_data)"
        )
    return values.reshape(dims)
