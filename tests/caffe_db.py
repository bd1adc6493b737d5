"""Caffe databases for tests, encoded here by hand (protobuf wire format), not by the code under
test: ``Datum``, ``BlobProto`` and (Caffe SSD) ``AnnotatedDatum`` bytes, and LMDB databases
holding them."""

from __future__ import annotations

import itertools
import struct

import numpy as np


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _int(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(value)


def _bytes(number: int, value: bytes) -> bytes:
    return _key(number, 2) + _varint(len(value)) + value


def datum(
    *,
    channels: int | None = None,
    height: int | None = None,
    width: int | None = None,
    data: bytes | None = None,
    label: int | None = None,
    float_data=(),
    encoded: bool | None = None,
) -> bytes:
    """A serialized ``caffe.Datum``; fields left None are absent (float_data unpacked, as Caffe)."""
    out = b""
    for number, value in ((1, channels), (2, height), (3, width)):
        if value is not None:
            out += _int(number, value)
    if data is not None:
        out += _bytes(4, data)
    if label is not None:
        out += _int(5, label)
    for value in float_data:
        out += _key(6, 5) + struct.pack("<f", value)
    if encoded is not None:
        out += _int(7, int(encoded))
    return out


def raw_datum(bgr: np.ndarray, label: int, float_data=()) -> bytes:
    """A raw Datum of an ``[H, W, C]`` uint8 image in BGR order: planar C × H × W bytes."""
    height, width, channels = bgr.shape
    planar = np.ascontiguousarray(np.transpose(bgr, [2, 0, 1]))
    return datum(
        channels=channels,
        height=height,
        width=width,
        data=planar.tobytes(),
        label=label,
        float_data=float_data,
    )


def encoded_datum(image_bytes: bytes, label: int) -> bytes:
    """An encoded Datum as convert_imageset --encoded writes it (no channels, height, width)."""
    return datum(data=image_bytes, label=label, encoded=True)


def _float(number: int, value: float) -> bytes:
    return _key(number, 5) + struct.pack("<f", value)


def annotated_datum(datum_bytes: bytes, groups, *, kind: int | None = 0) -> bytes:
    """A serialized ``caffe.AnnotatedDatum``: the Datum (field 1), ``type`` (2; None: absent)
    and ``groups`` (3), each ``(group_label, [(instance_id, (xmin, ymin, xmax, ymax),
    difficult), ...])``."""
    out = _bytes(1, datum_bytes)
    if kind is not None:
        out += _int(2, kind)
    for label, members in groups:
        group = _int(1, label)
        for instance_id, corners, difficult in members:
            bbox = b"".join(_float(n, v) for n, v in zip((1, 2, 3, 4), corners, strict=True))
            bbox += _int(6, int(difficult))
            group += _bytes(2, _int(1, instance_id) + _bytes(2, bbox))
        out += _bytes(3, group)
    return out


def annoset_datum(image_bytes: bytes, size, objects) -> bytes:
    """An AnnotatedDatum as ``create_annoset.py`` (``convert_annoset --encoded``) writes it for a
    VOC-style image: ``objects`` ``[(label, xmin, ymin, xmax, ymax, difficult), ...]`` in pixels
    of an image of ``size`` (height, width), normalized by the image size; one group per label in
    order of first appearance; instance ids counting from 0 within each group; the Datum's label
    -1 and its channels, height and width set."""
    height, width = size
    groups: dict[int, list] = {}
    for label, xmin, ymin, xmax, ymax, difficult in objects:
        members = groups.setdefault(label, [])
        corners = (xmin / width, ymin / height, xmax / width, ymax / height)
        members.append((len(members), corners, difficult))
    image = datum(channels=3, height=height, width=width, data=image_bytes, label=-1, encoded=True)
    return annotated_datum(image, list(groups.items()))


def blob(mean: np.ndarray, *, legacy: bool = False) -> bytes:
    """A ``.binaryproto`` BlobProto of a ``[C, H, W]`` mean: packed floats, shape ``[1, C, H, W]``
    (or, ``legacy``, num/channels/height/width)."""
    channels, height, width = mean.shape
    values = np.asarray(mean, "<f4").tobytes()
    if legacy:
        head = _int(1, 1) + _int(2, channels) + _int(3, height) + _int(4, width)
    else:
        dims = b"".join(_varint(d) for d in (1, channels, height, width))
        head = _bytes(7, _bytes(1, dims))
    return head + _bytes(5, values)


def write_lmdb(path, records: dict[bytes, bytes]) -> str:
    """An LMDB database at ``path`` (a folder) holding ``records``."""
    import lmdb

    env = lmdb.open(str(path), map_size=1 << 26)
    with env.begin(write=True) as txn:
        for key, value in records.items():
            txn.put(key, value)
    env.close()
    return str(path)


def reference(datum, *, mean=None, mean_values=(), scale=1.0, crop=0, offset=(0, 0), mirror=False):
    """Caffe's output (planar, float32) for a planar uint8 ``datum`` [C, H, W].

    Caffe (data_transformer.cpp, Transform(Datum)) computes, for every channel c and output row h
    and column w of the crop_size window at (h_off, w_off), in float32:

        top_index  = (c * height + h) * width + (mirror ? width - 1 - w : w)
        data_index = (c * datum_height + h_off + h) * datum_width + w_off + w
        top[top_index] = (datum[data_index] - mean[data_index]) * scale      (mean file)
                       = (datum[data_index] - mean_values[c]) * scale        (mean values)
    """
    channels, datum_height, datum_width = datum.shape
    height, width = (crop, crop) if crop else (datum_height, datum_width)
    h_off, w_off = offset if crop else (0, 0)
    flat = datum.reshape(-1).astype(np.float32)
    top = np.zeros(channels * height * width, np.float32)
    for c, h, w in itertools.product(range(channels), range(height), range(width)):
        top_index = (c * height + h) * width + (width - 1 - w if mirror else w)
        data_index = (c * datum_height + h_off + h) * datum_width + w_off + w
        if mean is not None:
            value = flat[data_index] - mean.reshape(-1)[data_index]
        elif mean_values:
            value = flat[data_index] - np.float32(mean_values[c if len(mean_values) > 1 else 0])
        else:
            value = flat[data_index]
        top[top_index] = value * np.float32(scale)
    return top.reshape(channels, height, width)


def planar_bgr(rgb_hwc) -> np.ndarray:
    """An RGB ``[H, W, C]`` image as Caffe's planar BGR ``[C, H, W]``."""
    return np.transpose(np.asarray(rgb_hwc)[..., ::-1], [2, 0, 1])
