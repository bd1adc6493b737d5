"""File sources: listing through ``tf.io.gfile``, sharding, seeded file shuffling, interleave.

Every file-based source reads through :func:`read_files`, so sharding and shuffling behave the
same whatever the format, and ``gs://``, ``ram://`` and TensorFlow's other filesystems work.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import tensorflow as tf

from object_input.sources._base import ReadContext
from object_input.tracing.maps import map_on_cpu

PathSource = str | os.PathLike | Sequence[str | os.PathLike]

_GLOB_CHARS = frozenset("*?[")


def list_files(source: PathSource, suffixes: Sequence[str] = ()) -> list[str]:
    """Sorted file paths of ``source``: a glob pattern, a directory, a file, or a list of those.

    A directory contributes its files with one of ``suffixes``, or every file if none has one.
    A pattern matching nothing raises FileNotFoundError naming it.
    """
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise FileNotFoundError("no input files: the source list is empty")
    files: list[str] = []
    for item in items:
        item = os.fspath(item)
        if _GLOB_CHARS & set(item):
            matched = sorted(tf.io.gfile.glob(item))
        elif tf.io.gfile.isdir(item):
            entries = sorted(
                path
                for path in (
                    os.path.join(item, name.rstrip("/")) for name in tf.io.gfile.listdir(item)
                )
                if not tf.io.gfile.isdir(path)
            )
            matched = [e for e in entries if e.endswith(tuple(suffixes))] or entries
        else:
            matched = [item] if tf.io.gfile.exists(item) else []
        if not matched:
            raise FileNotFoundError(f"no input files match {item!r}")
        files.extend(matched)
    return sorted(dict.fromkeys(files))


def read_files(
    files: Sequence[str],
    read: Callable[..., tf.data.Dataset],
    context: ReadContext,
    *,
    index_name: str = "",
    first_index: int = 0,
    checked: bool = False,
) -> tf.data.Dataset:
    """``(record_id, payload)`` pairs from ``read(path)`` datasets of payloads, one per file.

    ``record_id`` is ``"path:<index_name>index"``: the payload's position within the file,
    counted from ``first_index`` (CSV: 1-based line numbers after the header). Sharding is by
    file when there are at least ``num_shards`` files, else by record; shards are disjoint and
    together complete. Files are shuffled (seeded, anew each epoch) when the pipeline shuffles,
    then interleaved ``num_readers`` at a time, ``block_length`` records from each in turn.

    With ``checked``, ``read(path, record_id)`` names its records itself (``record_id(i)`` is
    the id of the payload at 0-based position ``i``, so a reader that runs a function per record
    builds it there, not in a stage of its own) and, where the file cannot be read further,
    raises; when ``context.marks`` it yields ``(record_id, payload, error, detail)`` instead: a
    nonzero ``error`` (a code of :mod:`object_input.reliability.errors`, e.g. ``unreadable_file``)
    marks where the file could not be read further, ``detail`` says why. The pairs or marked records
    come out as the reader yields them: the pipeline's policy settles the marks.
    """
    reading = context.reading
    files = list(files)
    by_file = len(files) >= reading.num_shards
    if by_file:
        files = files[reading.shard_index :: reading.num_shards]
    dataset = tf.data.Dataset.from_tensor_slices(files)
    # Record-level sharding needs the same record order in every worker: no file shuffle then.
    if context.shuffle and reading.file_shuffle and by_file and len(files) > 1:
        dataset = context.shuffled(dataset, len(files))

    def with_ids(path: tf.Tensor) -> tf.data.Dataset:
        prefix = tf.strings.join([path, ":" + index_name])

        def record_id(index: tf.Tensor) -> tf.Tensor:
            return tf.strings.join([prefix, tf.strings.as_string(index + first_index)])

        if checked:
            return read(path, record_id)
        return map_on_cpu(read(path).enumerate(), lambda i, payload: (record_id(i), payload))

    dataset = dataset.interleave(
        with_ids,
        cycle_length=max(1, min(reading.num_readers, len(files))),
        block_length=reading.block_length,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=context.deterministic,
    )
    if not by_file:
        dataset = dataset.shard(reading.num_shards, reading.shard_index)
    return dataset
