"""The option groups of ``make_dataset``: :class:`ReadOptions` (``reading=``),
:class:`DecodeOptions` (``decoding=``) and :class:`ServiceOptions` (``service=``), and the rules
of their checked fields. Small frozen objects group what the signature does not spell out (as
TFDS groups reading in ``ReadConfig``), so that ``help()`` and IDEs show every name with its
default. Import them from :mod:`object_input.options` or the package.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from object_input.option_rules import Rule

SERVICE_MODES = ("distributed_epoch", "parallel_epochs")
UNKNOWN_CLASS_POLICIES = ("error", "drop")
BOX_RANGE_POLICIES = ("error", "clip")
LARGE_IMAGE_POLICIES = ("error", "downscale")

# The checked fields of the option groups, by name (for a config and for the decoder).
GROUP_RULES: dict[str, Rule] = {
    "num_readers": Rule(int, 1),
    "block_length": Rule(int, 1),
    "num_shards": Rule(int, 1),
    "file_shuffle": Rule(bool),
    "use_display_name": Rule(bool),
    "multiclass_scores": Rule(bool),
    "channels": Rule(choices=(0, 1, 3, 4)),
    "unknown_classes": Rule(choices=UNKNOWN_CLASS_POLICIES),
    "boxes_out_of_range": Rule(choices=BOX_RANGE_POLICIES),
    "max_image_pixels": Rule(int, 1, optional=True),
    "large_images": Rule(choices=LARGE_IMAGE_POLICIES),
}


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
            GROUP_RULES[name].check(getattr(self, name), f"reading {name}")
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
      trust_manifest: TFRecord files whose verified manifest (``object-input inspect
        --verify``) still holds for every file, under these settings, are read without the
        per-record checks and their catch; False checks every record always
        (docs/reliability.md, "Verified data").
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
    trust_manifest: bool = True


@dataclasses.dataclass(frozen=True)
class ServiceOptions:
    """Run decoding, augmentation and batching on tf.data service workers.

    Attributes:
      address: ``"grpc://host:port"`` of the dispatcher.
      mode: "distributed_epoch" (each example once per epoch across workers) or
        "parallel_epochs" (every worker produces whole epochs).
      job_name: consumers that share a job name share its data.
      audit: count, in this process, the records each pass delivered, and say what it lost
        (:mod:`object_input.reliability.audit`; read with ``object_input.stats`` or
        ``object_input.AuditLogger``). Needs finite ``num_epochs`` and files whose record count
        is known (verified: ``object-input inspect --verify``).
      lost_worker_timeout_s: seconds a worker may go unanswering before this process ends its
        unfinished tasks at the dispatcher, so that a pass never waits forever for a worker
        that died: the pass ends without what that worker had read and not sent (the audit
        counts it) and a warning names the worker (:mod:`object_input.scale_out.lost_workers`,
        run on a thread of this process; ``object-input serve dispatcher`` runs it too). None:
        no watch here.
    """

    address: str
    mode: str = "distributed_epoch"
    job_name: str | None = None
    audit: bool = False
    lost_worker_timeout_s: float | None = 60.0

    def __post_init__(self) -> None:
        if self.mode not in SERVICE_MODES:
            raise ValueError(f"service mode must be one of {SERVICE_MODES}, got {self.mode!r}")
        timeout = self.lost_worker_timeout_s
        seconds = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
        if timeout is not None and not (seconds and timeout > 0):
            raise ValueError(
                f"lost_worker_timeout_s must be a positive number of seconds or None, "
                f"got {timeout!r}"
            )
