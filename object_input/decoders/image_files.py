"""Image bytes: the formats' signatures, sizes from headers, a placeholder, and strict checks.

In the pipeline (graph ops): :func:`image_magic` tells which format bytes start like,
:func:`header_size` reads an image's size without decoding it, and :data:`PLACEHOLDER_PNG` is what
a flagged record decodes instead of its own bytes; every source that reads encoded images uses
them. Outside any pipeline (Python): the converters check every image they write with
:func:`decode_image_file`, and ``object-input inspect`` every record's image, so that the two
agree on what a broken image is: bytes that are not a JPEG, PNG, GIF or BMP file, a JPEG whose
data ends before its end-of-image marker (a file cut short; some decoders fill its missing rows
with gray), or bytes TensorFlow's decoder refuses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import tensorflow as tf

#: The signatures of the formats tf.io.decode_image reads, by format name, in the order of
#: :func:`image_magic`'s flags.
SIGNATURES = {
    "jpeg": b"\xff\xd8\xff",
    "png": b"\x89PNG\r\n\x1a\n",
    "gif": b"GIF8",
    "bmp": b"BM",
}
# What the pipeline compares: at most the first 4 bytes, so a PNG damaged after them is an
# image to decode (undecodable), not a foreign file.
_MAGIC = tuple(signature[:4] for signature in SIGNATURES.values())
_ZEROS8 = b"\0" * 8
# The least JPEG whose header reads as 1x1: what header reads see for other formats.
_TINY_JPEG = (
    b"\xff\xd8\xff\xc0\x00\x0b\x08\x00\x01\x00\x01\x01\x01\x11\x00"
    b"\xff\xda\x00\x08\x01\x01\x00\x00?\x00\xff\xd9"
)
#: A 1x1 gray PNG: what a skipped record decodes instead of its own bytes.
PLACEHOLDER_PNG = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x00\x00\x00\x00:~\x9bU"
    b"\x00\x00\x00\nIDATx\x9cc`\x00\x00\x00\x02\x00\x01H\xaf\xa4q\x00\x00\x00\x00IEND\xaeB`\x82"
)
# JPEG markers: start of scan, end of image, and the ones without a length (TEM, RST0-7, SOI).
_SOS, _EOI = 0xDA, 0xD9
_STANDALONE = frozenset([0x01, *range(0xD0, 0xD9)])
TRUNCATED_JPEG = "truncated JPEG: the data ends before its end-of-image marker"


class ImageError(ValueError):
    """Image bytes that cannot be used; the message says why."""


def image_format(data: bytes) -> str | None:
    """``"jpeg"``, ``"png"``, ``"gif"`` or ``"bmp"`` from the bytes' signature; None else."""
    for name, signature in SIGNATURES.items():
        if data.startswith(signature):
            return name
    return None


def png_size(encoded: tf.Tensor) -> tf.Tensor:
    """(height, width) from a PNG's IHDR chunk; (-1, -1) when ``encoded`` is not a PNG."""
    # IHDR: width then height, 4 big-endian bytes each, from byte 16. Padded so that short or
    # foreign bytes still give 8 digits.
    dims = tf.strings.substr(tf.strings.join([tf.strings.substr(encoded, 16, 8), _ZEROS8]), 0, 8)
    digits = tf.cast(tf.io.decode_raw(dims, tf.uint8), tf.int32)
    sizes = tf.reduce_sum(tf.reshape(digits, [2, 4]) * [2**24, 2**16, 2**8, 1], axis=1)
    is_png = tf.equal(tf.strings.substr(encoded, 0, 8), SIGNATURES["png"])
    return tf.where(is_png & (tf.strings.length(encoded) >= 24), tf.stack([sizes[1], sizes[0]]), -1)


def header_size(
    encoded: tf.Tensor,
    magic: tf.Tensor,
    decode_pixels: Callable[[tf.Tensor], tf.Tensor],
    is_raw: Any = False,
    raw_size: Any = (0, 0),
) -> tf.Tensor:
    """(height, width) of encoded image bytes whose :func:`image_magic` is ``magic``: a JPEG's
    or PNG's from its header (no decode), a GIF's or BMP's from ``decode_pixels(encoded)``;
    ``raw_size`` where ``is_raw`` (raw pixels); 0 where the bytes are no image."""
    is_jpeg, is_png = magic[0], magic[1]
    # Header reads without a branch per format: a stand-in where the format differs.
    jpeg_size = tf.io.extract_jpeg_shape(tf.where(is_jpeg, encoded, _TINY_JPEG))[:2]
    size = tf.where(is_raw, raw_size, tf.where(is_png, png_size(encoded), jpeg_size))
    # GIF and BMP: their decoder tells (a rare format, one branch).
    return tf.cond(
        tf.reduce_any(magic) & ~(is_raw | is_jpeg | is_png),
        lambda: tf.shape(decode_pixels(encoded))[:2],
        lambda: tf.where(is_raw | is_jpeg | is_png, size, 0),
    )


def looks_like_image(encoded: tf.Tensor) -> tf.Tensor:
    """Whether ``encoded`` starts like a JPEG, PNG, GIF or BMP file (what decode_image reads)."""
    return tf.reduce_any(image_magic(encoded))


def image_magic(encoded: tf.Tensor) -> tf.Tensor:
    """bool ``[4]``: whether ``encoded`` starts like a JPEG, PNG, GIF, BMP (one substr op)."""
    heads = tf.strings.substr(encoded, [0] * len(_MAGIC), [len(m) for m in _MAGIC])
    return tf.equal(heads, _MAGIC)


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
