"""Option groups of ``make_dataset`` for the rarely tuned families, and keyword checking.

The common parameters are explicit in ``make_dataset``'s signature; these small frozen objects
group the rest (as TFDS groups reading in ``ReadConfig``), so that ``help()`` and IDEs show every
name with its default.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import tensorflow as tf

from object_input.suggest import did_you_mean

AUTOTUNE = tf.data.AUTOTUNE
SERVICE_MODES = ("distributed_epoch", "parallel_epochs")
T = TypeVar("T")


def unknown_keyword(what: str, name: str, valid: Iterable[str]) -> TypeError:
    """A TypeError naming ``name`` and the closest of ``valid`` names."""
    hint = did_you_mean(name, sorted(valid))
    return TypeError(f"{what} got an unexpected keyword argument {name!r}{hint}")


def check_keywords(what: str, given: Iterable[str], valid: Iterable[str]) -> None:
    """Raise :func:`unknown_keyword` for the first name of ``given`` not in ``valid``."""
    valid = set(valid)
    for name in given:
        if name not in valid:
            raise unknown_keyword(what, name, valid)


def checked_keywords(fn: Callable[..., T]) -> Callable[..., T]:
    """Wrap ``fn`` so that an unknown keyword names itself and the closest valid names."""
    valid = tuple(inspect.signature(fn).parameters)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        check_keywords(f"{fn.__name__}()", kwargs, valid)
        return fn(*args, **kwargs)

    return wrapper


def field_names(cls: type) -> tuple[str, ...]:
    """The field names of a dataclass."""
    return tuple(f.name for f in dataclasses.fields(cls))


def build(cls: type, what: str, value: Any) -> Any:
    """``value`` as a ``cls``: None → defaults, a mapping → keyword arguments, else as given."""
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if isinstance(value, Mapping):
        check_keywords(cls.__name__, value, field_names(cls))
        return cls(**value)
    raise TypeError(f"{what} must be a {cls.__name__} or a dict of its fields, got {value!r}")


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """How files are listed, sharded and interleaved.

    Attributes:
      file_shuffle: shuffle the file order (seeded, anew each epoch) when ``shuffle`` is on.
      num_readers: files read in parallel (interleave cycle length).
      block_length: consecutive records taken from one file before moving to the next.
      compression: TFRecord compression: "auto" (GZIP for a ``.gz`` suffix), None, "GZIP", "ZLIB".
      num_shards, shard_index: this worker's share; by file when there are enough files, else by
        record. ``input_context`` (from ``tf.distribute``) sets both.
    """

    file_shuffle: bool = True
    num_readers: int = 8
    block_length: int = 1
    compression: str | None = "auto"
    num_shards: int = 1
    shard_index: int = 0
    input_context: tf.distribute.InputContext | None = None

    def __post_init__(self) -> None:
        if self.input_context is not None:
            object.__setattr__(self, "num_shards", self.input_context.num_input_pipelines)
            object.__setattr__(self, "shard_index", self.input_context.input_pipeline_id)
        for name in ("num_readers", "block_length", "num_shards"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"reading {name} must be an integer >= 1, got {value!r}")
        if not 0 <= self.shard_index < self.num_shards:
            raise ValueError(
                f"reading needs 0 <= shard_index < num_shards, got {self.shard_index}, "
                f"{self.num_shards}"
            )
        if self.compression not in ("auto", None, "", "GZIP", "ZLIB"):
            raise ValueError(
                f"reading compression must be 'auto', None, 'GZIP' or 'ZLIB', "
                f"got {self.compression!r}"
            )


@dataclasses.dataclass(frozen=True)
class DecodeOptions:
    """How ``tf.train.Example`` detection records are decoded (see ``ExampleDecoder``).

    Attributes:
      channels: image channels to decode to (1, 3 or 4; 0 keeps the file's own count).
      use_display_name: match ``class/text`` against label map display names.
      multiclass_scores: decode ``image/object/class/multiclass_scores`` into ``[N, C]``.
      unknown_classes: "error" or "drop" (counted) for class names missing from the label map.
      extra_features: ``{record key: tf.io feature spec}`` decoded and passed through.
      defer_decode: when the steps start with flips and a ``random_crop_image``, decode only the
        crop window (same pixels, less work).
      jpeg_dct_scaling: with ``defer_decode`` and an ``image_size``, decode a JPEG window at
        least twice the output size at 1/2, 1/4 or 1/8 scale in the DCT: cheaper, not
        bit-identical (docs/performance.md measures the difference).
      boxes_out_of_range: box coordinates outside [0, 1]: "error" (a bad record), or "clip"
        (boxes left without area are dropped and counted in ``num_dropped_boxes``). Float noise
        (within 1e-5) is clipped either way.
      max_image_pixels: largest height × width accepted, read from the image header before
        decoding (None: no limit).
      large_images: an image over ``max_image_pixels``: "error" (a bad record) or "downscale"
        (decoded at reduced size, JPEG by DCT scaling; masks too; decoding is not deferred).
    """

    channels: int = 3
    use_display_name: bool = False
    multiclass_scores: bool = False
    unknown_classes: str = "error"
    extra_features: Mapping[str, Any] | None = None
    defer_decode: bool = True
    jpeg_dct_scaling: bool = False
    boxes_out_of_range: str = "error"
    max_image_pixels: int | None = None
    large_images: str = "error"


@dataclasses.dataclass(frozen=True)
class ServiceOptions:
    """Run decoding, augmentation and batching on tf.data service workers.

    Attributes:
      address: ``"grpc://host:port"`` of the dispatcher.
      mode: "distributed_epoch" (each example once per epoch across workers) or
        "parallel_epochs" (every worker produces whole epochs).
      job_name: consumers that share a job name share its data.
    """

    address: str
    mode: str = "distributed_epoch"
    job_name: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in SERVICE_MODES:
            raise ValueError(f"service mode must be one of {SERVICE_MODES}, got {self.mode!r}")
