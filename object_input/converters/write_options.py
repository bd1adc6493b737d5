"""How every converter writes (shards, label map, order, compression, threads): one set of
options with their defaults, checks and ``object-input convert`` flags.

Free of TensorFlow, so that ``object-input convert --help`` builds its flags from these fields
without loading it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from object_input.label_map import LabelMapSource
from object_input.suggest import did_you_mean

COMPRESSIONS = (None, "GZIP")
#: A converter's write policy (``WriteOptions.on_error``): an image that fails its check is
#: left out (named in the result) or stops the writing. The same two words as
#: ``make_dataset(on_error=...)``, but a setting of its own, taken when the records are written.
RAISE, SKIP = "raise", "skip"
#: In the order of every ``--on-error`` (``make_dataset(on_error=...)``'s).
ON_ERROR = (RAISE, SKIP)
F = TypeVar("F", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Flag:
    """A field's command-line flag: its name and the rest of ``add_argument``'s keywords."""

    name: str
    options: Mapping[str, Any]


def _flag(name: str, **options: Any) -> dict[str, Flag]:
    """A field's metadata: set on the command line by flag ``name`` (``add_argument`` keywords
    ``options``; the destination is the field's, and so is the default unless ``options`` give
    one: a flag left out then reads as that default, and the field keeps its own)."""
    return {"flag": Flag(name, options)}


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    """How a converter writes its records and label map.

    Attributes:
      num_shards: number of TFRecord files (default: one per 1,000 images, at most 256).
      label_map: ``{name: id}`` or a label map file whose ids to use (e.g. the training split's,
        when converting validation); it must name every class. By default COCO keeps its
        category ids and the other converters number the class names found, sorted, from 1.
      label_map_output: where to write the label map (default ``label_map.pbtxt`` beside the
        shards).
      num_workers: threads building records (default: the CPUs available).
      shuffle, seed: write the images in a seeded random order (else in input order).
      compression: None or ``"GZIP"``.
      progress: show a progress bar on stderr.
      on_error: the write policy, for an image that does not decode, is truncated, or whose size
        disagrees with its annotation: ``"skip"`` leaves it out of the written records, and the
        result names it with the reason (``left_out``); ``"raise"`` stops the conversion at the
        first, naming it. A setting of the converter alone: what a pipeline later does with a
        bad record it reads is ``make_dataset(on_error=...)``'s.
      runner: None builds the records on local threads; an Apache Beam runner's name
        (``"DirectRunner"``, ``"DataflowRunner"``, ``"FlinkRunner"``, ``"SparkRunner"``,
        ``"PortableRunner"``) builds them in a Beam pipeline on it: the same records (needs
        ``object-input[beam]``; no progress bar).
      beam_options: more Beam pipeline options for ``runner``: one string of flags
        (``"--project=p --region=r"``) or a list of them.
    """

    num_shards: int | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--num-shards",
            type=int,
            help="TFRecord files to write (default: one per 1,000 images, at most 256)",
        ),
    )
    label_map: LabelMapSource | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--label-map",
            help="label map whose ids to use (e.g. the training split's, when converting "
            "validation); default: COCO's category ids, or the class names sorted, numbered "
            "from 1",
        ),
    )
    label_map_output: str | os.PathLike | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--label-map-output", help="where to write the label map (default: beside the shards)"
        ),
    )
    num_workers: int | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--workers",
            type=int,
            metavar="WORKERS",
            help="threads building records (default: the CPUs available)",
        ),
    )
    shuffle: bool = dataclasses.field(
        default=True,
        metadata=_flag(
            "--no-shuffle",
            action="store_false",
            help="write images in input order (default: a seeded random order)",
        ),
    )
    seed: int = dataclasses.field(
        default=0, metadata=_flag("--seed", type=int, help="seed of the order (default 0)")
    )
    compression: str | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--gzip", action="store_const", const="GZIP", help="write GZIP-compressed shards"
        ),
    )
    progress: bool = dataclasses.field(
        default=True, metadata=_flag("--no-progress", action="store_false", help="no progress bar")
    )
    on_error: str = dataclasses.field(
        default=SKIP,
        metadata=_flag(
            "--on-error",
            choices=ON_ERROR,
            default=None,
            help="images that do not decode, are truncated or whose size disagrees with the "
            "annotation: raise (stop at the first) or skip (leave them out, each named) "
            "(default: skip; without this flag the exit status is 3 when any image was left "
            "out, --on-error skip accepts that: status 0)",
        ),
    )

    runner: str | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--runner",
            help="build the records in an Apache Beam pipeline on this runner: DirectRunner, "
            "DataflowRunner, FlinkRunner, SparkRunner, PortableRunner (pip install "
            "object-input[beam]; default: local threads)",
        ),
    )
    beam_options: str | tuple[str, ...] | None = dataclasses.field(
        default=None,
        metadata=_flag(
            "--beam-options",
            metavar="FLAGS",
            help='more Beam pipeline options for --runner, as one string: --beam-options="'
            '--project=p --region=r --temp_location=gs://b/tmp"',
        ),
    )

    def __post_init__(self) -> None:
        for name in ("num_shards", "num_workers"):
            value = getattr(self, name)
            if value is not None and (not _is_int(value) or value < 1):
                raise ValueError(f"{name} must be an integer >= 1 or None, got {value!r}")
        if not _is_int(self.seed):
            raise ValueError(f"seed must be an integer, got {self.seed!r}")
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression must be None or 'GZIP', got {self.compression!r}")
        if self.on_error not in ON_ERROR:
            raise ValueError(f"on_error must be 'skip' or 'raise', got {self.on_error!r}")
        if self.runner is not None and (not isinstance(self.runner, str) or not self.runner):
            raise ValueError(f"runner must be a Beam runner's name or None, got {self.runner!r}")
        if self.beam_options is not None and self.runner is None:
            raise ValueError(
                "beam_options are for a Beam runner: give runner too (e.g. 'DirectRunner')"
            )
        if not isinstance(self.beam_options, (str, type(None))):
            object.__setattr__(self, "beam_options", tuple(self.beam_options))
            if not all(isinstance(flag, str) for flag in self.beam_options):
                raise ValueError(
                    f"beam_options must be a string of flags or a list of them, got "
                    f"{self.beam_options!r}"
                )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


FIELDS = tuple(field.name for field in dataclasses.fields(WriteOptions))


def write_options(write: WriteOptions | Mapping[str, Any] | None, **overrides: Any) -> WriteOptions:
    """``write`` as WriteOptions (None: the defaults; a mapping: fields by name), with
    ``overrides`` replacing its fields."""
    if write is None:
        write = {}
    if isinstance(write, Mapping):
        for name in write:
            if name not in FIELDS:
                hint = did_you_mean(name, FIELDS)
                raise TypeError(f"WriteOptions has no field {name!r}{hint}")
        write = WriteOptions(**write)
    if not isinstance(write, WriteOptions):
        raise TypeError(f"write must be a WriteOptions or a dict of its fields, got {write!r}")
    return dataclasses.replace(write, **overrides) if overrides else write


def takes_write_options(convert: F) -> F:
    """Let a converter take ``WriteOptions`` fields as keywords too (``num_shards=2``): they
    replace those fields of its ``write`` argument, which it receives as one WriteOptions."""

    @functools.wraps(convert)
    def wrapper(*args: Any, write: Any = None, **keywords: Any) -> Any:
        overrides = {name: keywords.pop(name) for name in FIELDS if name in keywords}
        return convert(*args, write=write_options(write, **overrides), **keywords)

    return wrapper
