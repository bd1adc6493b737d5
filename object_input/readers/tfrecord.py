"""TFRecord reading: file listing, sharding, seeded file shuffling and parallel interleave."""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence

import tensorflow as tf

Source = str | os.PathLike | Sequence[str | os.PathLike]

_RECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfrecord.gz", ".tfrecords.gz", ".record")


def list_files(source: Source) -> list[str]:
    """Sorted file paths of ``source``: a glob pattern, a directory, a file, or a list of those.

    A directory contributes its TFRecord files (``*.tfrecord[s][.gz]``, ``*.record``), or every
    file if none has such a suffix. A pattern matching nothing raises FileNotFoundError naming it.
    """
    items = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not items:
        raise FileNotFoundError("no input files: the source list is empty")
    files: list[str] = []
    for item in items:
        item = os.fspath(item)
        if os.path.isdir(item):
            entries = sorted(
                os.path.join(item, name)
                for name in os.listdir(item)
                if os.path.isfile(os.path.join(item, name))
            )
            records = [e for e in entries if e.endswith(_RECORD_SUFFIXES)]
            matched = records or entries
        elif glob.has_magic(item):
            matched = sorted(tf.io.gfile.glob(item))
        else:
            matched = [item] if tf.io.gfile.exists(item) else []
        if not matched:
            raise FileNotFoundError(f"no input files match {item!r}")
        files.extend(matched)
    return sorted(dict.fromkeys(files))


def compression_of(path: str, compression: str | None = "auto") -> str:
    """The TFRecord compression of ``path``: explicit, or from a ``.gz`` suffix when ``auto``."""
    if compression == "auto":
        return "GZIP" if path.endswith(".gz") else ""
    if compression not in (None, "", "GZIP", "ZLIB"):
        raise ValueError(f"compression must be 'auto', None, 'GZIP' or 'ZLIB', got {compression!r}")
    return compression or ""


def tfrecord_dataset(
    files: Sequence[str],
    *,
    compression: str | None = "auto",
    num_shards: int = 1,
    shard_index: int = 0,
    shuffle_files: bool = True,
    seed: int | None = None,
    num_readers: int = 8,
    block_length: int = 1,
    deterministic: bool = True,
) -> tf.data.Dataset:
    """Records of ``files`` as ``(record_id, serialized)`` string pairs.

    ``record_id`` is ``"path:index"`` and names the record in decode errors. Sharding is by file
    when there are at least ``num_shards`` files, else by record; shards are disjoint and together
    complete. Files are shuffled (seeded, anew each epoch) before a parallel interleave over
    ``num_readers`` files at a time, ``block_length`` records from each in turn.
    """
    if num_shards < 1 or not 0 <= shard_index < num_shards:
        raise ValueError(f"need 0 <= shard_index < num_shards, got {shard_index}, {num_shards}")
    files = list(files)
    codes = {compression_of(f, compression) for f in files}
    by_file = len(files) >= num_shards
    if by_file:
        files = files[shard_index::num_shards]
    dataset = tf.data.Dataset.from_tensor_slices(files)
    # Record-level sharding needs the same record order in every worker: no file shuffle then.
    if shuffle_files and by_file and len(files) > 1:
        dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)

    def read(path: tf.Tensor) -> tf.data.Dataset:
        if len(codes) == 1:
            records = tf.data.TFRecordDataset(path, compression_type=next(iter(codes)))
        else:
            records = tf.data.TFRecordDataset(
                path,
                compression_type=tf.where(tf.strings.regex_full_match(path, r".*\.gz"), "GZIP", ""),
            )
        prefix = tf.strings.join([path, ":"])
        return records.enumerate().map(
            lambda i, r: (tf.strings.join([prefix, tf.strings.as_string(i)]), r)
        )

    dataset = dataset.interleave(
        read,
        cycle_length=max(1, min(num_readers, len(files))),
        block_length=block_length,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if not by_file:
        dataset = dataset.shard(num_shards, shard_index)
    return dataset
