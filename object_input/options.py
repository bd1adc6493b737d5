"""``make_dataset``'s options, each declared once, and the option checks.

:data:`DATASET_OPTIONS` declares every ``make_dataset`` parameter once: name, type, default,
check and meaning. From it come ``make_dataset``'s signature and the Args of its docstring
(generated text, :mod:`object_input.docgen.options`), ``DatasetOptions``, the fields a
pipeline config may set (:mod:`object_input.config.pipeline_config`), the checks of every entry
point (:func:`check_option`) and the table of ``docs/options.md``. The common parameters are
explicit in the signature; the option groups (:mod:`object_input.option_groups`) hold the rest.
This module is where every option name is imported from: the groups, and the declaration
framework (:mod:`object_input.option_rules`: ``Rule``, ``Option``) too.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import tensorflow as tf

from object_input import batching
from object_input.option_groups import GROUP_RULES, DecodeOptions, ReadOptions, ServiceOptions
from object_input.option_rules import Option, Rule, check_size, field_names
from object_input.reliability import errors
from object_input.suggest import did_you_mean

AUTOTUNE = tf.data.AUTOTUNE
MASK_FORMATS = ("png", "numerical")
OUTPUT_DTYPES = (None, "uint8", "float32", "bfloat16")
TRAILING_STEPS = ("batched", "exact", "device")
EMPTY_IMAGE_POLICIES = ("keep", "drop")
T = TypeVar("T")


def _rule(name: str) -> Rule:
    option = _DECLARED.get(name)
    return option.rule if option is not None else GROUP_RULES[name]


def option_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is not valid for the option ``name`` (``"must be ..., got ..."``), or None.

    ``name`` is a ``make_dataset`` option with a rule or a checked field of an option group.
    """
    return _rule(name).problem(value)


def check_option(name: str, value: Any, what: str = "") -> None:
    """Raise ValueError ``"{what}{name} must be ..., got {value!r}"`` for an invalid value."""
    _rule(name).check(value, f"{what}{name}")


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
        "passes over the data; None repeats forever. Each pass is shuffled with a seed of its "
        "own: pass p is the same whatever num_epochs is.",
        _COUNT,
        config=True,
    ),
    Option(
        "seed",
        "int | None",
        None,
        "with a seed, batches are identical run after run whatever the parallelism; without one, "
        "each iterator draws its own.",
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
