"""The converters' writing as an Apache Beam pipeline (``WriteOptions(runner=...)``).

The annotations are read, the label map checked and the images put in order where the pipeline
is launched, as for the local converters (:func:`~object_input.converters.common.prepare`). Beam
then builds every image's record on its workers with the converter's own per-image build (read
the file, verify it by decoding it in full, encode), and writes the shards under temporary names
(:class:`~object_input.writers.StagedShards`). A record's shard and its place there follow from
its index in the order and from the indices of the images left out before it, never from which
worker built it: the shards are byte-identical to the local converter's for the same options, on
any runner and any number of workers. When the pipeline has succeeded, the launching process
writes the label map and gives the shards their names; a failed pipeline leaves neither.

Each shard's records meet on one worker to be written in order, so a worker holds one shard's
records (about 1,000 images with the default shard count) in memory.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Iterable
from typing import Any

import tensorflow as tf

from object_input.converters.common import (
    BadImage,
    Conversion,
    ConversionError,
    ConversionResult,
    Plan,
    build_or_reason,
    finish,
    prepare,
    result,
)
from object_input.converters.write_options import WriteOptions
from object_input.scale_out.beam_runs import beam, pipeline_options, run_and_collect
from object_input.writers import StagedShards

_LEFT_OUT = "left_out"


class _Build(beam.DoFn):
    """``(index, item)`` → ``(index, record)``, or to the ``left_out`` output
    ``(index, reason)`` for an image that fails its check."""

    def __init__(self, build: Any, on_error: str):
        self._build = build
        self._on_error = on_error

    def process(self, entry: tuple[int, Any]) -> Iterable[Any]:
        index, item = entry
        built = build_or_reason(self._build, item, self._on_error)
        if isinstance(built, str):
            yield beam.pvalue.TaggedOutput(_LEFT_OUT, (index, built))
        else:
            yield index, built


def _place(
    entry: tuple[int, bytes], left_out: list[int], num_shards: int
) -> tuple[int, tuple[int, bytes]]:
    """``(shard, (rank, record))``: the local writer's round robin over the records written,
    the rank being the record's index less the images left out before it."""
    index, record = entry
    rank = index - bisect.bisect_left(left_out, index)
    return rank % num_shards, (rank, record)


def _write_shard(
    entry: tuple[int, Iterable[tuple[int, bytes] | None]], paths: list[str], compression: str | None
) -> int:
    """Write one shard's records in rank order (None: the marker that makes an empty shard
    exist); returns how many."""
    shard, placed = entry
    records = sorted((p for p in placed if p is not None), key=lambda p: p[0])
    options = tf.io.TFRecordOptions(compression_type=compression or "")
    with tf.io.TFRecordWriter(paths[shard], options) as writer:
        for _, record in records:
            writer.write(record)
    return len(records)


def _bad_image(err: BaseException) -> str | None:
    """The message of the :class:`BadImage` that stopped a pipeline (``on_error="raise"``), or
    None. Runners hand a worker's error back as the exception itself or as its traceback's
    text, with the step's name appended."""
    found = re.search(r"BadImage: (.*?)(?: \[while running '[^']*'\])*$", str(err), re.M)
    return found.group(1) if found else None


def run_on_beam(
    conversion: Conversion, output: str | os.PathLike, write: WriteOptions
) -> ConversionResult:
    """Write ``conversion``'s records as :func:`~object_input.converters.writing.run` does
    locally, on the Beam runner ``write.runner`` with ``write.beam_options``.

    The images and ``output`` must be reachable from the workers under the same paths, and
    the workers must have this package installed.
    """
    output = os.fspath(output)
    plan = prepare(conversion, output, write)
    with StagedShards(output, plan.num_shards, write.compression) as shards:
        count, left_out = _run_pipeline(conversion, plan, shards, write)
        finish(conversion, plan, write, count, left_out)
    return result(conversion, plan, shards, count, left_out)


def _run_pipeline(
    conversion: Conversion, plan: Plan, shards: StagedShards, write: WriteOptions
) -> tuple[int, dict[int, str]]:
    """Build ``plan``'s records on Beam and write them to ``shards``' staged files; returns the
    records written and the images left out (``{index: reason}``)."""
    pipeline = beam.Pipeline(
        options=pipeline_options(write.runner, write.beam_options, write.num_workers)
    )
    built = (
        pipeline
        | "Items" >> beam.Create(list(enumerate(plan.items)), reshuffle=False)
        | "Spread" >> beam.Reshuffle()
        | "Build"
        >> beam.ParDo(_Build(conversion.build, write.on_error)).with_outputs(
            _LEFT_OUT, main="records"
        )
    )
    left_out_indices = (
        built[_LEFT_OUT]
        | "Indices" >> beam.Map(lambda entry: entry[0])
        | "AllLeftOut" >> beam.combiners.ToList()
        | "Sort" >> beam.Map(sorted)
    )
    markers = pipeline | "Shards" >> beam.Create([(k, None) for k in range(plan.num_shards)])
    written = (
        (
            built.records
            | "Place"
            >> beam.Map(_place, beam.pvalue.AsSingleton(left_out_indices), plan.num_shards),
            markers,
        )
        | "WithEmpty" >> beam.Flatten()
        | "ByShard" >> beam.GroupByKey()
        | "Write" >> beam.Map(_write_shard, shards.staged, write.compression)
    )
    found = (
        written | "Counts" >> beam.Map(lambda count: ("written", count)),
        built[_LEFT_OUT] | "Reasons" >> beam.Map(lambda entry: (_LEFT_OUT, entry)),
    ) | "Report" >> beam.Flatten()
    try:
        entries = run_and_collect(pipeline, found, shards.folder)
    except Exception as err:
        bad = _bad_image(err)
        if bad is None:
            raise
        raise BadImage(bad) from err
    left_out = dict(value for kind, value in entries if kind == _LEFT_OUT)
    count = sum(value for kind, value in entries if kind == "written")
    if count + len(left_out) != len(plan.items):
        raise ConversionError(
            f"the Beam pipeline wrote {count} records and left out {len(left_out)} images of "
            f"{len(plan.items)}"
        )
    return count, left_out
