"""``object-input inspect --verify``: decode every record of TFRecord files through the
pipeline's own checks, and write the manifests of the files found good
(:mod:`object_input.verification.manifest`), which ``make_dataset`` then trusts.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from object_input import fields, wording
from object_input.label_map import LabelMapSource
from object_input.options import DecodeOptions, build
from object_input.pipeline import make_dataset
from object_input.reliability import skips
from object_input.sources._files import list_files
from object_input.sources.tfrecord import SUFFIXES, TFRecord, compression_of
from object_input.tracing.maps import map_on_cpu
from object_input.verification import manifest


@dataclasses.dataclass(frozen=True)
class FileVerdict:
    """What :func:`verify_files` found in one file.

    Attributes:
      file: the file's path.
      records: the records that passed every check.
      num_bad: the records that failed (the file's unreadable rest counts as one).
      bad: the first of them, ``"file:index: reason: what"``.
    """

    file: str
    records: int
    num_bad: int = 0
    bad: tuple[str, ...] = ()

    @property
    def verified(self) -> bool:
        return self.num_bad == 0


@dataclasses.dataclass(frozen=True)
class Verification:
    """The verdicts of :func:`verify_files` and the manifests it wrote."""

    files: tuple[FileVerdict, ...]
    manifests: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every file was verified."""
        return all(verdict.verified for verdict in self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "files": [dataclasses.asdict(v) | {"verified": v.verified} for v in self.files],
            "manifests": list(self.manifests),
        }

    def format(self) -> str:
        """A plain-text report: one line per file, then the bad records of each."""
        good = [v for v in self.files if v.verified]
        lines = [f"{len(good)} of {wording.count(len(self.files), 'file')} verified"]
        for verdict in self.files:
            state = "verified" if verdict.verified else wording.count(verdict.num_bad, "bad record")
            lines.append(
                f"  {verdict.file}: {wording.count(verdict.records, 'good record')}, {state}"
            )
            lines.extend(f"    {line}" for line in verdict.bad)
            if verdict.num_bad > len(verdict.bad):
                lines.append(f"    ... and {verdict.num_bad - len(verdict.bad)} more")
        lines.extend(f"wrote {path}" for path in self.manifests)
        return "\n".join(lines)


def verify_files(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    label_map: LabelMapSource | None = None,
    masks: str | None = None,
    num_keypoints: int = 0,
    decoding: DecodeOptions | Mapping[str, Any] | None = None,
    compression: str | None = "auto",
    write: bool = True,
) -> Verification:
    """Decode every record of the TFRecord files of ``source`` through the pipeline's checks,
    and record the files whose records all pass, read to their end, in manifests beside them.

    The decoding settings are those ``make_dataset`` is given for training (``label_map``,
    ``masks``, ``num_keypoints``, ``decoding``); ``make_dataset`` trusts a manifest under
    settings that ask no check these did not run
    (:func:`object_input.verification.manifest.uncovered`). A file with a bad record loses its
    entry. ``write=False`` only reports.
    """
    settings = {
        "label_map": label_map,
        "masks": masks,
        "num_keypoints": num_keypoints,
        "decoding": decoding,
        "compression": compression,
    }
    checked = [verify_file(path, **settings) for path in list_files(source, SUFFIXES)]
    return record_verdicts(checked, write)


def verify_file(
    path: str,
    *,
    label_map: LabelMapSource | None = None,
    masks: str | None = None,
    num_keypoints: int = 0,
    decoding: DecodeOptions | Mapping[str, Any] | None = None,
    compression: str | None = "auto",
) -> tuple[FileVerdict, dict[str, Any] | None]:
    """Decode every record of one TFRecord file as :func:`verify_files` does; returns its
    verdict and, when it passed, its manifest entry (None else)."""
    decoding = dataclasses.replace(build(DecodeOptions, "decoding", decoding), trust_manifest=False)
    tfrecord = TFRecord(
        path,
        compression=compression,
        label_map=label_map,
        masks=masks,
        num_keypoints=num_keypoints,
        decoding=decoding,
    )
    before = manifest.file_facts(path)
    dataset = make_dataset(tfrecord, batch_size=None, shuffle=False, on_error="skip")
    map_on_cpu(dataset, lambda features: features[fields.RECORD_ID]).reduce(0, lambda n, _: n + 1)
    counts = skips.counter_of(dataset).snapshot()
    verdict = FileVerdict(path, counts.passed, counts.total_skipped, counts.offenders)
    if not verdict.verified:
        return verdict, None
    classes = manifest.class_facts(path, compression_of(path, compression))
    if manifest.file_facts(path) != before:
        return FileVerdict(path, counts.passed, 1, (f"{path}: changed while verified",)), None
    settings = tfrecord.decoder.settings()
    return verdict, manifest.entry(before, counts.passed, settings, classes)


def record_verdicts(
    checked: Sequence[tuple[FileVerdict, dict[str, Any] | None]], write: bool = True
) -> Verification:
    """The :class:`Verification` of :func:`verify_file`'s answers, in their order; with
    ``write``, the passed files' entries recorded in their manifests and the others' dropped."""
    passed = {verdict.file: entry for verdict, entry in checked if entry is not None}
    failed = [verdict.file for verdict, entry in checked if entry is None]
    written = manifest.record(passed, failed) if write else []
    return Verification(tuple(verdict for verdict, _ in checked), tuple(written))
