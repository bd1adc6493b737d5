"""Image files checked outside any pipeline: a full, strict decode, and a JPEG's end marker.

The converters check every image they write with :func:`decode_image_file`, and
``object-input inspect`` every record's image, so that the two agree on what a broken image is:
bytes that are not a JPEG, PNG, GIF or BMP file, a JPEG whose data ends before its end-of-image
marker (a file cut short; some decoders fill its missing rows with gray), or bytes TensorFlow's
decoder refuses.
"""

from __future__ import annotations

import re

import tensorflow as tf

_SIGNATURES = {
    b"\xff\xd8\xff": "jpeg",
    b"\x89PNG\r\n\x1a\n": "png",
    b"GIF8": "gif",
    b"BM": "bmp",
}
# JPEG markers: start of scan, end of image, and the ones without a length (TEM, RST0-7, SOI).
_SOS, _EOI = 0xDA, 0xD9
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD9)])
TRUNCATED_JPEG = "truncated JPEG: the data ends before its end-of-image marker"


class ImageError(ValueError):
    """Image bytes that cannot be used; the message says why."""


def image_format(data: bytes) -> str | None:
    """``"jpeg"``, ``"png"``, ``"gif"`` or ``"bmp"`` from the bytes' signature; None else."""
    for signature, name in _SIGNATURES.items():
        if data.startswith(signature):
            return name
    return None


def jpeg_cut_short(data: bytes) -> bool:
    """Whether the JPEG ``data`` ends before its end-of-image marker.

    The segments are stepped over by their lengths and each scan up to the marker after it, so
    that the end marker of an embedded (EXIF) thumbnail does not count and bytes after the end
    do not matter. Data that is malformed otherwise is left to the decoder (False).
    """
    at, size = 2, len(data)
    while at + 2 <= size:
        if data[at] != 0xFF:
            return False
        marker = data[at + 1]
        if marker == 0xFF:  # a fill byte before the marker
            at += 1
            continue
        if marker == _EOI:
            return False
        if marker in _STANDALONE:
            at += 2
            continue
        if at + 4 > size:
            return True
        at += 2 + int.from_bytes(data[at + 2 : at + 4], "big")
        if marker == _SOS:
            at = _scan_end(data, at)
    return True


def _scan_end(data: bytes, at: int) -> int:
    """Where the entropy-coded data from ``at`` ends: its next marker other than a stuffed 0xFF
    (``FF 00``) or a restart marker; the data's length when none follows."""
    while True:
        at = data.find(b"\xff", at)
        if at < 0 or at + 1 >= len(data):
            return len(data)
        following = data[at + 1]
        if following == 0 or 0xD0 <= following <= 0xD7:
            at += 2
        elif following == 0xFF:
            at += 1
        else:
            return at


def op_message(err: tf.errors.OpError) -> str:
    """The reason in a TensorFlow error, without the op and function names around it."""
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", err.message)
    return re.sub(r"\s*\[Op:\w+\].*$", "", message, flags=re.S).strip()


def decode_image_file(data: bytes, channels: int = 0) -> tf.Tensor:
    """The uint8 ``[height, width, channels]`` pixels of a JPEG, PNG, GIF (first frame) or BMP
    file's ``data``, decoded in full (``channels`` 0: the file's own count).

    Raises:
      ImageError: saying why: not one of those formats, a truncated JPEG, or what the decoder
        refused.
    """
    kind = image_format(data)
    if kind is None:
        raise ImageError("not a JPEG, PNG, GIF or BMP image")
    if kind == "jpeg" and jpeg_cut_short(data):
        raise ImageError(TRUNCATED_JPEG)
    try:
        return tf.io.decode_image(data, channels=channels, expand_animations=False)
    except tf.errors.OpError as err:
        raise ImageError(f"{kind.upper()} does not decode: {op_message(err)}") from None
