"""Running this package's Apache Beam pipelines (conversion, ``inspect --verify``): their
options from a runner's name and flags, and what a pipeline found handed back to the process
that launched it.

Needs ``object-input[beam]``.
"""

from __future__ import annotations

import json
import os
import shlex
import uuid
from collections.abc import Sequence
from typing import Any

try:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import DirectOptions, PipelineOptions
except ImportError:
    raise ImportError(
        "running on Apache Beam needs apache-beam: pip install object-input[beam]"
    ) from None
import tensorflow as tf

#: How the DirectRunner runs its workers unless the options say: threads, as the local
#: converter does (building a record is mostly TensorFlow's image kernels and zlib, which release
#: the GIL; benchmarks/convert_beam.py).
DIRECT_RUNNING_MODE = "multi_threading"


def pipeline_options(
    runner: str, flags: str | Sequence[str] | None = None, num_workers: int | None = None
) -> PipelineOptions:
    """Options for a pipeline on ``runner`` with more ``flags`` (one string or a list). On the
    DirectRunner ``num_workers`` workers (default: the CPUs available) run as threads unless
    ``flags`` choose otherwise."""
    from object_input.writers.parallel import default_workers

    flags = shlex.split(flags) if isinstance(flags, str) else list(flags or ())
    options = PipelineOptions([f"--runner={runner}", *flags])
    if runner == "DirectRunner":
        direct = options.view_as(DirectOptions)
        given = " ".join(flags)
        if "--direct_num_workers" not in given:
            direct.direct_num_workers = num_workers or default_workers()
        if "--direct_running_mode" not in given:
            direct.direct_running_mode = DIRECT_RUNNING_MODE
    return options


def _save(elements: list, path: str) -> None:
    with tf.io.gfile.GFile(path, "w") as file:
        json.dump(elements, file)


def run_and_collect(pipeline: beam.Pipeline, found: beam.PCollection, folder: str) -> list[Any]:
    """Run ``pipeline`` and return the elements of ``found`` (JSON values; tuples come back as
    lists), passed through a file in ``folder``, which the workers and this process must both
    reach (the output's folder)."""
    path = os.path.join(folder, f".object_input-beam-{uuid.uuid4().hex}.json")
    _ = found | "Collect" >> beam.combiners.ToList() | "Save" >> beam.Map(_save, path)
    try:
        pipeline.run().wait_until_finish()
        with tf.io.gfile.GFile(path) as file:
            return json.load(file)
    finally:
        if tf.io.gfile.exists(path):
            tf.io.gfile.remove(path)
