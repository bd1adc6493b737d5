"""``inspect --verify`` as an Apache Beam pipeline: each file verified on a worker
(:func:`object_input.verification.verify.verify_file`), the manifests written where the pipeline
is launched, from the same verdicts and entries as a local run. Needs ``object-input[beam]``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from object_input.scale_out.beam_runs import beam, pipeline_options, run_and_collect
from object_input.sources._files import list_files
from object_input.sources.tfrecord import SUFFIXES
from object_input.verification.verify import (
    FileVerdict,
    Verification,
    record_verdicts,
    verify_file,
)


def _verify(path: str, settings: Mapping[str, Any]) -> tuple[dict[str, Any], dict | None]:
    verdict, entry = verify_file(path, **settings)
    return dataclasses.asdict(verdict), entry


def verify_files_on_beam(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    runner: str = "DirectRunner",
    beam_options: str | Sequence[str] | None = None,
    num_workers: int | None = None,
    write: bool = True,
    **settings: Any,
) -> Verification:
    """:func:`~object_input.verification.verify.verify_files` with the files spread over the
    workers of a Beam pipeline on ``runner`` (``beam_options``: more pipeline options;
    ``num_workers``: the DirectRunner's workers). ``settings`` are ``verify_files``' decoding
    settings (``label_map``, ``masks``, ``num_keypoints``, ``decoding``, ``compression``). The files
    must be reachable from the workers under the same paths."""
    files = list_files(source, SUFFIXES)
    pipeline = beam.Pipeline(options=pipeline_options(runner, beam_options, num_workers))
    found = (
        pipeline
        | "Files" >> beam.Create(files, reshuffle=False)
        | "Spread" >> beam.Reshuffle()
        | "Verify" >> beam.Map(_verify, settings)
    )
    answers = run_and_collect(pipeline, found, os.path.dirname(files[0]))
    by_file = {
        verdict["file"]: (FileVerdict(**{**verdict, "bad": tuple(verdict["bad"])}), entry)
        for verdict, entry in answers
    }
    return record_verdicts([by_file[path] for path in files], write)
