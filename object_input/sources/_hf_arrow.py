"""The Arrow side of :class:`~object_input.sources.HuggingFace`: a chunk of a dataset's rows as
flat numpy arrays (Arrow's own vectorized compute, no Python per row), and their signature for
``tf.data.Dataset.from_generator``. Nulls read as nothing (see the source's docstring).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.sources import _hf_layout as hf_layout

_DTYPES = {
    hf_layout.FLOAT: tf.float32,
    hf_layout.INT: tf.int64,
    hf_layout.FLAG: tf.bool,
    hf_layout.ID: tf.string,
}


def signature(layout: Mapping[str, str]) -> dict[str, tf.TensorSpec]:
    """The chunk generator's output: flat per-chunk arrays of every mapped key."""
    vector = lambda dtype: tf.TensorSpec([None], dtype)  # noqa: E731
    signature = {
        "row": vector(tf.int64),
        "image_bytes": vector(tf.string),
        "image_path": vector(tf.string),
    }
    for key in layout:
        if key == fields.IMAGE:
            continue
        dtype = _DTYPES[hf_layout.KINDS[key][1]]
        if key in hf_layout.OBJECT_KEYS:
            signature[f"{key}/lengths"] = vector(tf.int64)
            signature[f"{key}/values"] = vector(dtype)
        else:
            signature[key] = vector(dtype)
    if fields.BOXES in layout:
        signature["boxes/sizes"] = vector(tf.int64)
    return signature


def arrays(table: Any, rows: np.ndarray, layout: Mapping[str, str]) -> dict[str, np.ndarray]:
    """A chunk's columns (a ``pyarrow.Table`` of the rows ``rows``) as :func:`signature`'s
    flat arrays: per-object values flattened, with the number in each row."""
    import pyarrow.compute as pc

    # Each column in one piece, once: rows taken apart (a shard, a selection) come in pieces.
    columns = {name: table.column(name).combine_chunks() for name in table.column_names}
    out = {"row": rows}
    for key, path in layout.items():
        kind = hf_layout.KINDS[key][1]
        if key == fields.IMAGE:
            out["image_bytes"], out["image_path"] = _image_arrays(_column(columns, path))
        elif key in hf_layout.OBJECT_KEYS:
            out[f"{key}/lengths"], values = _per_object(columns, path)
            if key == fields.BOXES:
                out["boxes/sizes"] = _lengths(values)
                values = pc.list_flatten(values)
            out[f"{key}/values"] = _values(values, kind)
        else:
            out[key] = _values(_column(columns, path), kind)
    return out


def _column(columns: Mapping[str, Any], path: str) -> Any:
    """The Arrow array of one value per row at ``path``: a column, or a key of a column of
    dicts."""
    import pyarrow.compute as pc

    column, *keys = path.split(".")
    array = columns[column]
    for key in keys:
        array = pc.struct_field(array, [key])
    return array


def _per_object(columns: Mapping[str, Any], path: str) -> tuple[np.ndarray, Any]:
    """``(lengths, values)`` of the objects at ``path``: how many each row has, and their
    values one after another. ``path`` is a list column, a list key of a column of dicts, or a
    key of a column of lists of dicts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column, *keys = path.split(".")
    array, lengths = columns[column], None
    for key in keys:
        if not pa.types.is_struct(array.type):
            lengths, array = _lengths(array), pc.list_flatten(array)
        array = pc.struct_field(array, [key])
    if lengths is None:
        lengths, array = _lengths(array), pc.list_flatten(array)
    return lengths, array


def _lengths(array: Any) -> np.ndarray:
    """The length of each list of ``array``, 0 for a missing one."""
    import pyarrow.compute as pc

    return pc.fill_null(pc.list_value_length(array), 0).to_numpy().astype(np.int64)


def _values(array: Any, kind: str) -> np.ndarray:
    """Arrow values as the numpy array of ``kind``, nulls replaced (see :class:`HuggingFace`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if kind == hf_layout.ID:
        return pc.fill_null(pc.cast(array, pa.string()), "").to_numpy(zero_copy_only=False)
    if kind == hf_layout.FLOAT:
        # Unchecked: an integer area beyond float32's 2**24 is rounded, not refused.
        floats = pc.cast(array, pa.float32(), safe=False)
        return pc.fill_null(floats, float("nan")).to_numpy()
    values = pc.fill_null(
        pc.cast(array, pa.int64()), 0 if kind == hf_layout.FLAG else -1
    ).to_numpy()
    return values != 0 if kind == hf_layout.FLAG else values


def _image_arrays(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """The encoded bytes and paths of an image column (an ``Image`` feature's ``{bytes, path}``,
    bytes or paths), empty where absent."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_struct(column.type):
        data, path = pc.struct_field(column, ["bytes"]), pc.struct_field(column, ["path"])
    elif pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        data, path = column, pa.nulls(len(column), pa.string())
    else:
        data, path = pa.nulls(len(column), pa.binary()), column

    def filled(array: Any, empty: Any) -> np.ndarray:
        return pc.fill_null(array, empty).to_numpy(zero_copy_only=False)

    return filled(data, b""), filled(pc.cast(path, pa.string()), "")
