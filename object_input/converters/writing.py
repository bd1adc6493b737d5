"""A conversion's writing run: on local threads, or on Apache Beam (``WriteOptions(runner=...)``,
:mod:`object_input.converters.beam`)."""

from __future__ import annotations

import os
from typing import Any

from object_input.converters.common import (
    Conversion,
    ConversionResult,
    build_or_reason,
    finish,
    prepare,
    result,
)
from object_input.converters.write_options import WriteOptions
from object_input.writers import ShardedWriter, write_parallel


def run(conversion: Conversion, output: str | os.PathLike, write: WriteOptions) -> ConversionResult:
    """Write every item's record in ``write``'s order, built on local threads (or on
    ``write.runner``: :mod:`object_input.converters.beam`), to shards of ``output``, then the
    label map. An item whose image fails its check is left out and listed, or under
    ``write.on_error == "raise"`` stops the writing.

    The shards get their names only when every record is written
    (:class:`~object_input.writers.StagedShards`): a conversion that stops, or writes no record,
    leaves no shard and no label map. They replace the dataset under ``output``: its shards of
    another count or compression are removed then, and listed in the result's ``replaced``."""
    if write.runner is not None:
        # Imported here: it needs apache-beam, which only a Beam run asks for.
        from object_input.converters.beam import run_on_beam

        return run_on_beam(conversion, output, write)
    plan = prepare(conversion, output, write)
    left_out: dict[int, str] = {}

    def build_or_leave_out(entry: tuple[int, Any]) -> bytes | None:
        index, item = entry
        built = build_or_reason(conversion.build, item, write.on_error)
        if isinstance(built, str):
            left_out[index] = built
            return None
        return built

    with ShardedWriter(output, plan.num_shards, write.compression) as writer:
        count = write_parallel(
            list(enumerate(plan.items)),
            build_or_leave_out,
            writer,
            num_workers=write.num_workers,
            progress=write.progress,
            description=conversion.description,
        )
        finish(conversion, plan, write, count, left_out)
    return result(conversion, plan, writer, count, left_out)
