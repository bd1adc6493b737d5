"""What a source's :meth:`~object_input.sources.Source.sample` builds its small data from.

Every registered source declares, next to itself, how to write a small valid sample of its
format and how to damage one record of it; the policy and fuzz suites (tests/) run every source
through ``make_dataset`` that way instead of a hand-written case per source. The helpers here
are the parts those samples share: a tiny image, a box per record, and a seeded change of bytes.
"""

from __future__ import annotations

import numpy as np

from object_input import fields

#: Records in a sample.
RECORDS = 3
#: The record a damaged sample spoils.
DAMAGED = 1
#: ``damage`` that certainly spoils the record (a failed check, or bytes that cannot be read);
#: any other value seeds a random change that may or may not.
CERTAIN = 0
#: One box per record, normalized ``[ymin, xmin, ymax, xmax]``.
BOX = (0.25, 0.25, 0.75, 0.5)
#: Image side in pixels.
SIDE = 8
#: Bytes of no image format.
NOT_AN_IMAGE = b"GIF7 not an image"


def pixels(index: int) -> np.ndarray:
    """The uint8 ``[SIDE, SIDE, 3]`` image of record ``index``."""
    return np.full((SIDE, SIDE, 3), 40 * index + 20, np.uint8)


def png(index: int) -> bytes:
    """Record ``index``'s image as PNG bytes."""
    import tensorflow as tf

    return tf.io.encode_png(pixels(index)).numpy()


def mutated(data: bytes, seed: int) -> bytes:
    """``data`` with up to four bytes overwritten and up to 16 cut from its end (seeded)."""
    rng = np.random.default_rng(seed)
    out = bytearray(data)
    for _ in range(rng.integers(0, 5)):
        if out:
            out[rng.integers(0, len(out))] = rng.integers(0, 256)
    return bytes(out[: max(0, len(out) - int(rng.integers(0, 17)))])


def spoiled(records: list[bytes], damage: int | None, certain: bytes) -> list[bytes]:
    """``records`` with record :data:`DAMAGED` spoiled by ``damage``: replaced by ``certain``
    under :data:`CERTAIN`, its bytes changed by :func:`mutated` under any other seed, unchanged
    under None."""
    out = list(records)
    if damage == CERTAIN:
        out[DAMAGED] = certain
    elif damage is not None:
        out[DAMAGED] = mutated(out[DAMAGED], damage)
    return out


def images(damage: int | None) -> list[bytes]:
    """Every record's PNG, record :data:`DAMAGED`'s spoiled (not an image under ``CERTAIN``)."""
    return spoiled([png(i) for i in range(RECORDS)], damage, NOT_AN_IMAGE)


def write_tfrecord(path: str, records: list[bytes], compression: str = "") -> str:
    """``records`` written as a TFRecord file at ``path``; the path."""
    import tensorflow as tf

    with tf.io.TFRecordWriter(path, compression) as writer:
        for record in records:
            writer.write(record)
    return path


def spoiled_box(seed: int) -> list[float]:
    """A box for the damaged record: certainly bad (``ymin > ymax``) under ``CERTAIN``, else
    four seeded values around ``[0, 1]``, NaN and infinity among them, that may be fine."""
    if seed == CERTAIN:
        return [0.9, 0.1, 0.2, 0.5]
    rng = np.random.default_rng(seed)
    choices = np.array([0.0, 0.25, 0.5, 1.0, -0.5, 1.5, np.nan, np.inf], np.float32)
    return [float(v) for v in rng.choice(choices, 4)]


def columns(damage: int | None) -> dict[str, np.ndarray]:
    """A sample's ``{field: values}`` in memory (images, a box and a class each), record
    :data:`DAMAGED`'s box spoiled by ``damage`` (see ``Source.sample``)."""
    boxes = np.array([[BOX]] * RECORDS, np.float32)
    if damage is not None:
        boxes[DAMAGED, 0] = spoiled_box(damage)
    return {
        fields.IMAGE: np.stack([pixels(i) for i in range(RECORDS)]),
        fields.BOXES: boxes,
        fields.CLASSES: np.ones([RECORDS, 1], np.int32),
    }
