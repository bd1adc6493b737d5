"""``make_dataset``'s options, each declared once, the option groups, and the option checks.

:data:`DATASET_OPTIONS` declares every ``make_dataset`` parameter once: name, type, default,
check and meaning. From it come ``make_dataset``'s signature and the Args of its docstring
(generated text, :mod:`object_input.docgen.options`), ``DatasetOptions``, the fields a
pipeline config may set (:mod:`object_input.config.pipeline_config`), the checks of every entry
point (:func:`check_option`) and the table of ``docs/options.md``. The common parameters are
explicit in the signature; the small frozen objects here group the rest (as TFDS groups reading in
``ReadConfig``), so that ``help()`` and IDEs show every name with its default.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import tensorflow as tf

from object_input import batching
from object_input.reliability import errors
from object_input.suggest import did_you_mean

AUTOTUNE = tf.data.AUTOTUNE
SERVICE_MODES = ("distributed_epoch", "parallel_epochs")
MASK_FORMATS = ("png", "numerical")
OUTPUT_DTYPES = (None, "uint8", "float32", "bfloat16")
TRAILING_STEPS = ("batched", "exact", "device")
EMPTY_IMAGE_POLICIES = ("keep", "drop")
UNKNOWN_CLASS_POLICIES = ("error", "drop")
BOX_RANGE_POLICIES = ("error", "clip")
LARGE_IMAGE_POLICIES = ("error", "downscale")
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Rule:
    """The values an option takes: of ``kind`` (or None when ``optional``), at least ``minimum``,
    one of ``choices`` (whatever their kind)."""

    kind: type = object
    minimum: int | None = None
    optional: bool = False
    choices: tuple[Any, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why ``value`` breaks the rule (``"must be ..."``), or None."""
        if value is None and self.optional:
            return None
        if self.choices:
            if value in self.choices:
                return None
            names = [c for c in self.choices if isinstance(c, str)]
            hint = did_you_mean(value.lower(), names) if isinstance(value, str) else ""
            return f"must be one of {self.choices}{self._or_none()}, got {value!r}{hint}"
        if not _is_kind(value, self.kind):
            return f"must be {_KIND_NAMES[self.kind]}{self._or_none()}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"must be >= {self.minimum}, got {value!r}"
        return None

    def allowed(self) -> str:
        """The rule in words, for the options table."""
        if self.choices:
            text = ", ".join(f"`{c!r}`" for c in self.choices)
        else:
            text = _KIND_NAMES[self.kind]
            if self.minimum is not None:
                text += f" >= {self.minimum}"
        return text + (" or `None`" if self.optional else "")

    def _or_none(self) -> str:
        return " or None" if self.optional else ""


_KIND_NAMES = {bool: "true or false", int: "an integer", str: "a string"}


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        # NumPy integers count (a seed drawn with NumPy is one); bool, an int in Python, never.
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return isinstance(value, kind)


# The checked fields of the option groups, by name (for a config and for the decoder).
_GROUP_RULES = {
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


def option_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not valid for the option ``name`` (``"must be ..., got ..."``), or None.

    ``name`` is a ``make_dataset`` option with a rule or a checked field of an option group.
    """
    option = _DECLARED.get(name)
    rule = option.rule if option is not None else _GROUP_RULES[name]
    return rule.problem(value)


def check_option(name: str, value: Any, what: str = "") -> None:
    """Raise ValueError ``"{what}{name} must be ..., got {value!r}"`` for an invalid value."""
    problem = option_problem(name, value)
    if problem:
        raise ValueError(f"{what}{name} {problem}")


def check_size(name: str, size: Any) -> tuple[int, int] | None:
    """``size`` as ``(height, width)`` of positive ints, or None; an error naming ``name``."""
    if size is None:
        return None
    keep = f"leave {name} out (None) to keep each image's own size"
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        hint = f"e.g. {name}=({size}, {size}) for a square" if size >= 1 else keep
        raise TypeError(f"{name} takes (height, width), got the single number {size}; {hint}")
    if not isinstance(size, Sequence) or len(size) != 2 or not all(_is_kind(d, int) for d in size):
        raise ValueError(f"{name} must be (height, width) of positive ints, got {size!r}")
    if min(size) < 1:
        raise ValueError(
            f"{name} must be (height, width) of positive ints, got {tuple(size)!r}; {keep}"
        )
    return tuple(int(d) for d in size)


def unknown_keyword(what: str, name: str, valid: Iterable[str]) -> TypeError:
    """A TypeError naming ``name`` and where it goes: the option group or ``make_dataset``
    keyword it is, else the closest of ``valid`` names, else all of them."""
    valid = sorted(valid)
    hint = _where_it_goes(name) or did_you_mean(name, valid) or f" (known: {', '.join(valid)})"
    return TypeError(f"{what} got an unexpected keyword argument {name!r}{hint}")


def _where_it_goes(name: str) -> str:
    """``"; num_readers is a ReadOptions field: ..."`` when ``name`` is a field of an option
    group or a ``make_dataset`` keyword (given where it is not one), else ``""``."""
    groups = (("reading", ReadOptions), ("decoding", DecodeOptions), ("service", ServiceOptions))
    for keyword, group in groups:
        if name in field_names(group):
            return f"; {name} is a {group.__name__} field: pass {keyword}={{{name!r}: ...}}"
    if name in _DECLARED:
        return f"; {name} is a make_dataset keyword: make_dataset({name}=...)"
    return ""


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
            check_option(name, getattr(self, name), "reading ")
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


@dataclasses.dataclass(frozen=True)
class Option:
    """One ``make_dataset`` parameter, declared once.

    Attributes:
      name: the keyword.
      hint: its annotation as source text (the generated signature writes it).
      default: its default.
      doc: its meaning: the entry of ``make_dataset``'s docstring and of ``docs/options.md``.
      rule: the values it takes (None: ``convert``, or the pipeline, checks it with others).
      convert: ``convert(name, value)``: the value checked and in the form the pipeline takes.
      config: a pipeline config (pipeline.config, YAML) may set it, checked by ``rule``.
    """

    name: str
    hint: str
    default: Any
    doc: str
    rule: Rule | None = None
    convert: Callable[[str, Any], Any] | None = None
    config: bool = False

    def check(self, value: Any) -> Any:
        """``value`` checked (a ValueError naming the option and the value) and converted."""
        problem = self.rule.problem(value) if self.rule is not None else None
        if problem:
            raise ValueError(f"{self.name} {problem}")
        return value if self.convert is None else self.convert(self.name, value)


def _reading(name: str, value: Any) -> ReadOptions:
    return build(ReadOptions, name, value)


def _decoding(name: str, value: Any) -> DecodeOptions:
    return build(DecodeOptions, name, value)


def _service(name: str, value: Any) -> ServiceOptions | None:
    if value is None or isinstance(value, ServiceOptions):
        return value
    if isinstance(value, str):
        return ServiceOptions(value)
    return build(ServiceOptions, name, value)


_COUNT = Rule(int, 1, optional=True)

#: Every ``make_dataset`` parameter, in signature order; ``source`` is the one positional.
DATASET_OPTIONS: tuple[Option, ...] = (
    Option(
        "source",
        "Any",
        None,
        "a path, glob, directory or list of them (format from ``format`` or the suffix), a "
        "source object from ``object_input.sources``, a ``tf.data.Dataset`` of feature dicts, "
        "or a Hugging Face ``datasets.Dataset`` / ``IterableDataset`` (read by "
        "``object_input.sources.HuggingFace`` with its defaults).",
    ),
    Option(
        "config",
        "Any",
        None,
        "a ``PipelineConfig`` (e.g. ``load_pipeline_config``): the values it sets replace the "
        "defaults; keywords given here replace both.",
    ),
    Option(
        "format",
        "str | None",
        None,
        "the format of path sources when their suffix does not tell "
        "(``object_input.sources.formats()`` lists them).",
    ),
    Option(
        "batch_size",
        "int | None",
        32,
        "examples per batch; None yields single examples, unbatched.",
        _COUNT,
        config=True,
    ),
    Option(
        "augment",
        "Sequence[Any] | Augmentation",
        (),
        'steps in order: ``[("name", {params}), {"name": {params}}, "name", ...]``.',
    ),
    Option(
        "image_size",
        "Sequence[int] | None",
        None,
        "resize every image to ``(height, width)``.",
        convert=check_size,
    ),
    Option(
        "pad_image_size",
        "Sequence[int] | None",
        None,
        "pad every image up to ``(height, width)`` instead (no resize).",
        convert=check_size,
    ),
    Option(
        "max_boxes",
        "int | None",
        None,
        "the most boxes an example may have (see ``box_overflow``).",
        _COUNT,
        config=True,
    ),
    Option(
        "batching",
        "str",
        "dynamic",
        '"dynamic" pads to the batch maxima; "static" to ``max_boxes`` and a fixed image size '
        "(examples without boxes need no ``max_boxes``).",
        Rule(choices=batching.BATCHING_MODES),
    ),
    Option(
        "box_overflow",
        "str",
        "error",
        'more boxes than ``max_boxes``: "error", or "truncate" (counted in ``num_dropped_boxes``).',
        Rule(choices=batching.OVERFLOW_POLICIES),
    ),
    Option(
        "drop_remainder",
        "bool | None",
        None,
        "drop the last, smaller batch; None: only with ``batching='static'``, whose batches then "
        "have a known batch size too (pass False to keep every example).",
        Rule(bool, optional=True),
        config=True,
    ),
    Option(
        "group_by_aspect_ratio",
        "bool",
        False,
        "dynamic batching only: batch examples whose images have similar width / height "
        "together, so that tall and wide images pad each other less.",
    ),
    Option(
        "shuffle",
        "bool | None",
        None,
        "shuffle files and records; None: the source's default (on for training data).",
        Rule(bool, optional=True),
        config=True,
    ),
    Option(
        "shuffle_buffer_size",
        "int",
        2048,
        "records in the shuffle buffer.",
        Rule(int, 1),
        config=True,
    ),
    Option(
        "num_epochs",
        "int | None",
        1,
        "passes over the data; None repeats forever.",
        _COUNT,
        config=True,
    ),
    Option(
        "seed",
        "int | None",
        None,
        "with a seed, batches are identical run after run whatever the parallelism.",
        Rule(int, optional=True),
        config=True,
    ),
    Option(
        "label_map",
        "str | os.PathLike | Mapping[str, int] | None",
        None,
        "class names to ids for detection records from path sources: a label map file or a dict; "
        "it names the data's classes too (``class_names``). None: a ``label_map.pbtxt`` beside "
        "TFRecord files (what the converters write) names the classes.",
    ),
    Option(
        "masks",
        "str | None",
        None,
        "instance masks to decode from detection records of path sources.",
        Rule(optional=True, choices=MASK_FORMATS),
        config=True,
    ),
    Option(
        "num_keypoints",
        "int",
        0,
        "keypoints per box to decode from detection records of path sources (0: none).",
        Rule(int, 0),
        config=True,
    ),
    Option(
        "keras",
        "bool | str",
        False,
        'yield ``(images, targets)`` tuples for ``model.fit``: "detection" gives '
        '``{"boxes", "labels"}`` for KerasHub detectors: boxes in ``bounding_box_format``, labels '
        "``0..C-1``, the data's label map in id order (``dataset.class_names``; COCO's ids "
        '1..90 become 0..79), padded rows labelled -1; "classification" gives ``labels``: the '
        "``label`` field, else each image's one image-level class as such a label (``convert "
        'folders`` data); True gives ``{"boxes", "classes"}``, pipeline boxes and class ids as '
        "stored (padded rows class -1), or for examples without boxes the labels of "
        '"classification". A class id the label map lacks is an error naming the record; '
        "without a known label map a label is ``class id - 1``.",
    ),
    Option(
        "bounding_box_format",
        "str | None",
        None,
        'the Keras 3 box format of ``keras="detection"`` targets: "xyxy", "yxyx", "xywh", '
        '"center_xywh", "center_yxhw" (pixels) or their "rel_" forms.',
    ),
    Option(
        "output_dtype",
        "str | None",
        None,
        'None keeps uint8 until an op makes floats; "uint8", "float32", "bfloat16".',
        Rule(choices=OUTPUT_DTYPES),
    ),
    Option(
        "trailing_steps",
        "str",
        "batched",
        "where the steps at the end of ``augment`` run when images are resized to "
        '``image_size`` and batched: "batched" (the trailing steps with a batched form, which '
        "docs/ops.md lists: flips, rotation, affine, blur, sharpness, colour, RandAugment, ...: "
        "drawn and moving the annotations per example, their pixels changed after the resize, "
        'on the batch, compiled with XLA), "exact" (every step in order, per example, before the '
        'resize), or "device": those steps\' pixel work waits for the training device: each '
        "example carries ``device_parameters`` for "
        "``object_input.keras.layers.DeviceAugmentation`` "
        "(or ``object_input.apply_device_stage``). "
        "See docs/performance.md.",
        Rule(choices=TRAILING_STEPS),
    ),
    Option(
        "num_parallel_calls",
        "int",
        AUTOTUNE,
        "parallelism of the per-example map.",
    ),
    Option(
        "prefetch",
        "int",
        AUTOTUNE,
        "batches prefetched.",
    ),
    Option(
        "deterministic",
        "bool",
        True,
        "keep the element order independent of thread timing (the per-example map keeps its "
        "order either way).",
    ),
    Option(
        "on_error",
        "str",
        errors.RAISE,
        'a bad record or unreadable file: "raise" stops with an error naming the file, record, '
        "source id and field (a TensorFlow op failing on a record, e.g. a truncated JPEG, "
        'names the record); "skip" drops that record alone (before batching) and counts it by '
        "reason: ``object_input.stats(dataset)`` reads the counts (docs/reliability.md).",
        Rule(choices=errors.ON_ERROR_POLICIES),
    ),
    Option(
        "empty_images",
        "str",
        "keep",
        'images without boxes: "keep", or "drop" (counted as ``empty``).',
        Rule(choices=EMPTY_IMAGE_POLICIES),
    ),
    Option(
        "reading",
        "ReadOptions | Mapping[str, Any] | None",
        None,
        "``ReadOptions`` or a dict of its fields (sharding, interleave, compression).",
        convert=_reading,
    ),
    Option(
        "decoding",
        "DecodeOptions | Mapping[str, Any] | None",
        None,
        "``DecodeOptions`` or a dict of its fields (channels, extra features, ...).",
        convert=_decoding,
    ),
    Option(
        "service",
        "ServiceOptions | str | None",
        None,
        "a tf.data service address or ``ServiceOptions``: decoding, augmentation and batching "
        "then run on its workers.",
        convert=_service,
    ),
)

_DECLARED = {option.name: option for option in DATASET_OPTIONS}
# The parameters that say what to read (source, format) and where options come from (config).
_NOT_OPTIONS = ("source", "config", "format")

#: make_dataset's defaults by keyword, from the declarations.
DEFAULTS: dict[str, Any] = {
    option.name: option.default for option in DATASET_OPTIONS if option.name not in _NOT_OPTIONS
}


def declared(name: str) -> Option:
    """The declaration of ``make_dataset``'s parameter ``name``."""
    return _DECLARED[name]


def config_options() -> tuple[Option, ...]:
    """The options a pipeline config may set, passed to ``make_dataset`` under their names."""
    return tuple(option for option in DATASET_OPTIONS if option.config)
