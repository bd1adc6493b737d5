"""Build records from many inputs on a thread pool and write them, in input order, to shards.

Building a record (reading an image file, decoding and PNG-encoding masks, serializing) is the slow
part of converting a dataset; it runs on ``num_workers`` threads (file reads, TensorFlow's image
kernels, zlib and pycocotools release the GIL). Results are written strictly in input order, so
the output is the same for any number of workers.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import tensorflow as tf

from object_input.writers.tf_example import ShardedWriter

Item = TypeVar("Item")


def default_workers() -> int:
    """Worker threads used when none are given: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def progress_bar(total: int, description: str, enabled: bool = True, unit: str = "img") -> Any:
    """A tqdm bar on stderr (a silent stand-in when disabled or tqdm is not installed)."""
    try:
        from tqdm import tqdm
    except ImportError:
        enabled = False
    if not enabled:
        return _NoBar()
    return tqdm(total=total, desc=description, unit=unit, file=sys.stderr, dynamic_ncols=True)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def write_parallel(
    items: Sequence[Item],
    build: Callable[[Item], tf.train.Example | bytes | None],
    writer: ShardedWriter,
    *,
    num_workers: int | None = None,
    progress: bool = True,
    description: str = "writing",
) -> int:
    """Write ``build(item)`` for every item to ``writer`` (open); returns the records written.

    ``build`` may return None to skip an item. An exception in ``build`` stops the writing and is
    raised here (leaving ``writer``'s block with it leaves no shard). Records go round-robin to
    the shards in item order whatever ``num_workers``::

        with ShardedWriter("out/train", num_shards=4) as writer:
            write_parallel(items, build, writer)
    """
    workers = num_workers or default_workers()
    if workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    # A bounded window of pending builds keeps memory flat on datasets of any size.
    window = 4 * workers
    bar = progress_bar(len(items), description, progress)
    pool = concurrent.futures.ThreadPoolExecutor(workers)
    pending: collections.deque = collections.deque()
    start = writer.count
    try:
        for item in items:
            pending.append(pool.submit(build, item))
            if len(pending) >= window:
                _write_one(pending.popleft(), writer, bar)
        while pending:
            _write_one(pending.popleft(), writer, bar)
    finally:
        # On an error, do not wait for the builds still queued.
        pool.shutdown(wait=True, cancel_futures=True)
        bar.close()
    return writer.count - start


def _write_one(future: concurrent.futures.Future, writer: ShardedWriter, bar: Any) -> None:
    record = future.result()
    if record is not None:
        writer.write(record)
    bar.update(1)
