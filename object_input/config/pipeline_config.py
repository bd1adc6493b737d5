"""Pipeline configuration: one object from a pipeline.config, a YAML file or a list of steps.

:func:`load_pipeline_config` reads

* an Object Detection API ``pipeline.config`` (protobuf text): ``train_config`` (batch size,
  ``data_augmentation_options``) and ``train_input_reader`` (inputs, label map, reader settings);
* a YAML file (``.yaml``/``.yml``) whose keys are the :class:`PipelineConfig` fields, with
  the augmentation under ``augment:`` (a top-level list is taken as the augmentation alone);
* a mapping with the YAML keys, or a list of augmentation steps.

Everything is validated at load time, and errors name the file, line and block. Relative paths
in a file are resolved against the file's folder. ``PipelineConfig.to_dataset_kwargs()`` gives
the keyword arguments of :func:`object_input.make_dataset`.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import difflib
import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from object_input.config import textproto
from object_input.config.textproto import Message, TextFormatError
from object_input.label_map import LabelMapError, load_label_map
from object_input.ops import Augmentation, ConfigError, StepSpec, get_step, normalize_step
from object_input.options import (
    DEFAULTS,
    DecodeOptions,
    ReadOptions,
    config_options,
    option_problem,
)
from object_input.suggest import did_you_mean

__all__ = ["PipelineConfig", "load_pipeline_config", "parse_augmentation"]

Step = dict[str, dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class PipelineConfig:
    """Input pipeline settings. Unset fields take :func:`~object_input.make_dataset`'s defaults
    (one declaration for every entry point); a value a config sets explicitly wins over them.

    Attributes:
      input_paths: files or glob patterns of TFRecords (a single string is accepted).
      label_map_path: text label map turning ``image/object/class/text`` into ids, or None.
      use_display_name: key the label map by ``display_name`` instead of ``name``.
      augment: augmentation steps, ``[{name: params}, ...]`` in order; validated on creation.
      file_shuffle: shuffle the file order when ``shuffle`` is on.
      num_readers: files read in parallel.
      read_block_length: consecutive records taken from one file before moving to the next.
      multiclass_scores: decode per-box multiclass scores.

    The fields after these are the ``make_dataset`` options a config may set (declared with
    ``config=True`` in :data:`object_input.options.DATASET_OPTIONS`): the same names, defaults,
    checks and meanings (docs/options.md). ``num_epochs`` also takes 0, the Object Detection
    API's "forever", and reads it as None.
    """

    input_paths: list[str] = dataclasses.field(default_factory=list)
    label_map_path: str | None = None
    use_display_name: bool = DecodeOptions.use_display_name
    augment: list[Step] = dataclasses.field(default_factory=list)
    file_shuffle: bool = ReadOptions.file_shuffle
    num_readers: int = ReadOptions.num_readers
    read_block_length: int = ReadOptions.block_length
    multiclass_scores: bool = DecodeOptions.multiclass_scores
    # <generated: config fields> make_dataset's: python -m object_input.docgen.options
    batch_size: int | None = 32
    max_boxes: int | None = None
    drop_remainder: bool | None = None
    shuffle: bool | None = None
    shuffle_buffer_size: int = 2048
    num_epochs: int | None = 1
    seed: int | None = None
    masks: str | None = None
    num_keypoints: int = 0
    # </generated: config fields>
    # Where the file read set label_map_path ("pipeline.config:7:3"), named by label map errors.
    _label_map_where: str | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        paths = self.input_paths
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        if isinstance(paths, Sequence):
            paths = list(paths)
        if not isinstance(paths, list) or not all(isinstance(p, (str, os.PathLike)) for p in paths):
            raise ConfigError(f"input_paths must be a path or a list of paths, got {paths!r}")
        object.__setattr__(self, "input_paths", [os.fspath(p) for p in paths])
        if isinstance(self.label_map_path, os.PathLike):
            object.__setattr__(self, "label_map_path", os.fspath(self.label_map_path))
        if not isinstance(self.label_map_path, (str, type(None))):
            raise ConfigError(f"label_map_path must be a path or None, got {self.label_map_path!r}")
        for name in _CHECKED_FIELDS:
            problem = _problem(name, getattr(self, name))
            if problem:
                raise ConfigError(f"{name} {problem}")
        if self.num_epochs == 0:
            object.__setattr__(self, "num_epochs", None)
        object.__setattr__(self, "augment", _check_steps(self.augment, "augment"))

    def augmentation(self) -> Augmentation:
        """The augmentation steps as a callable :class:`~object_input.ops.Augmentation`."""
        return Augmentation(self.augment)

    def to_dataset_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`object_input.make_dataset` for the settings that differ
        from its defaults (a setting equal to the default changes nothing).

        Reader settings go into ``reading``, decoder ones into ``decoding``. ``source`` is the
        input paths, when the config names any. The label map file, if any, is loaded here
        (honouring ``use_display_name``), so a bad one fails before any data is read.
        """
        kwargs: dict[str, Any] = {}
        if self.input_paths:
            kwargs["source"] = list(self.input_paths)
        if self.label_map_path is not None:
            try:
                kwargs["label_map"] = load_label_map(self.label_map_path, self.use_display_name)
            except LabelMapError as err:
                if self._label_map_where is None:
                    raise
                raise LabelMapError(f"{self._label_map_where}: label_map_path: {err}") from None
        if self.augment:
            kwargs["augment"] = copy.deepcopy(self.augment)
        for name in _DATASET_FIELDS:
            if getattr(self, name) != DEFAULTS[name]:
                kwargs[name] = getattr(self, name)
        reading = {
            option: getattr(self, name)
            for name, option in _READING_FIELDS.items()
            if getattr(self, name) != getattr(ReadOptions, option)
        }
        if reading:
            kwargs["reading"] = reading
        if self.multiclass_scores:
            kwargs["decoding"] = {"multiclass_scores": True}
        return kwargs


# Settings passed to make_dataset under the same name, and those that go into ``reading``.
_DATASET_FIELDS = tuple(option.name for option in config_options())
_READING_FIELDS = {
    "file_shuffle": "file_shuffle",
    "num_readers": "num_readers",
    "read_block_length": "block_length",
}
# Fields checked as the make_dataset options or option-group fields they set.
_CHECKED_FIELDS = ("use_display_name", *_READING_FIELDS, "multiclass_scores", *_DATASET_FIELDS)


def _problem(name: str, value: Any) -> str | None:
    """Why ``value`` is invalid for field ``name`` (``"must be ..., got ..."``), or None."""
    if name == "num_epochs" and type(value) is int and value == 0:
        return None  # the Object Detection API's "forever", read as None
    return option_problem(_READING_FIELDS.get(name, name), value)


def _check_steps(steps: Any, what: str) -> list[Step]:
    """Validate a list of steps; returns them as ``[{name: params}]`` with params as given."""
    if isinstance(steps, (str, Mapping)) or not isinstance(steps, Sequence):
        raise ConfigError(f"{what} must be a list of steps, got {steps!r}")
    checked = []
    for number, step in enumerate(steps, 1):
        name, params = normalize_step(step, number)
        try:
            get_step(name).resolve(params)
        except ConfigError as err:
            raise ConfigError(f"{what} step #{number}: {err}") from None
        checked.append({name: params})
    return checked


def parse_augmentation(steps: Any) -> Augmentation:
    """An :class:`~object_input.ops.Augmentation` from a list of steps, a config file or object.

    ``steps`` is a list of steps (``"name"``, ``{name: params}`` or ``(name, params)``), a
    :class:`PipelineConfig`, or a path accepted by :func:`load_pipeline_config`.
    """
    if isinstance(steps, PipelineConfig):
        return steps.augmentation()
    if isinstance(steps, (str, os.PathLike)):
        return load_pipeline_config(steps).augmentation()
    return Augmentation(_check_steps(steps, "augment"))


def load_pipeline_config(source: Any) -> PipelineConfig:
    """A validated :class:`PipelineConfig` from a file path, a mapping or a list of steps.

    A path ending in ``.yaml``/``.yml`` is read as YAML, any other as an Object Detection API
    pipeline.config (protobuf text). Every error is a :class:`~object_input.ops.ConfigError`
    naming the file (with line and column for protobuf text).
    """
    if isinstance(source, PipelineConfig):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.lower().endswith((".yaml", ".yml")):
            return _from_yaml(path)
        try:
            return _from_pipeline_config(path)
        except TextFormatError as err:
            raise ConfigError(str(err)) from None
        except OSError as err:
            raise ConfigError(f"cannot read config {path!r}: {err}") from None
    if isinstance(source, Mapping):
        return _from_mapping(source, None, "config")
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        return PipelineConfig(augment=_check_steps(source, "augment"))
    raise TypeError(
        "load_pipeline_config takes a file path, a mapping or a list of steps, "
        f"got {type(source).__name__}"
    )


def _resolve_path(path: Any, base: str | None) -> Any:
    """``path`` relative to the folder ``base`` (absolute paths and URLs stay as they are)."""
    if not isinstance(path, (str, os.PathLike)):
        return path
    path = os.path.expanduser(os.fspath(path))
    if base is None or os.path.isabs(path) or re.match(r"^[A-Za-z][\w+.-]*://", path):
        return path
    return os.path.normpath(os.path.join(base, path))


# ---------------------------------------------------------------------------------------------
# YAML and mappings


def _from_yaml(path: str) -> PipelineConfig:
    try:
        import yaml
    except ImportError:
        raise ConfigError(
            f"{path}: reading YAML configs needs PyYAML (pip install object-input[yaml])"
        ) from None

    try:
        with open(path, "rb") as f:
            text = textproto.decode_text(f.read(), path)
        root = yaml.compose(text, Loader=_yaml_loader(yaml))
        data = yaml.load(text, Loader=_yaml_loader(yaml))
    except OSError as err:
        raise ConfigError(f"cannot read config {path!r}: {err}") from None
    except TextFormatError as err:
        raise ConfigError(str(err)) from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    if data is None:
        data = {}
    base = os.path.dirname(os.path.abspath(path))
    if isinstance(data, list):
        data = {"augment": data}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: expected a mapping of settings or a list of steps")
    config = _from_mapping(data, base, path)
    if "label_map_path" in data:
        # The last of repeated keys wins, as in the data; a merged one (<<) is named by the file.
        marks = [v.start_mark for k, v in root.value if k.value == "label_map_path"]
        where = f"{path}:{marks[-1].line + 1}:{marks[-1].column + 1}" if marks else path
        object.__setattr__(config, "_label_map_where", where)
    return config


def _yaml_loader(yaml: Any) -> type:
    """A SafeLoader (no tags that build objects, so no code runs) with located limits."""

    class Loader(yaml.SafeLoader):
        """Also reads ``1e-3`` as a float (YAML 1.1 wants ``1.0e-3``); bounds depth and ints."""

        depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.depth >= textproto.MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"collections nested deeper than {textproto.MAX_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_yaml_int(self, node: Any) -> int:
            digits = self.construct_scalar(node)
            value = None if len(digits) > 100 else super().construct_yaml_int(node)
            if value is None or not -(2**63) <= value < 2**64:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"integer {digits[:20]}... is outside the 64-bit range",
                    node.start_mark,
                )
            return value

    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )
    return Loader


def _from_mapping(data: Mapping, base: str | None, where: str) -> PipelineConfig:
    names = [f.name for f in dataclasses.fields(PipelineConfig) if f.init]
    for key in data:
        if key not in names:
            hint = did_you_mean(key, names)
            raise ConfigError(f"{where}: unknown setting {key!r}{hint} (known: {', '.join(names)})")
    kwargs = dict(data)
    if "input_paths" in kwargs:
        paths = kwargs["input_paths"]
        if isinstance(paths, list):
            kwargs["input_paths"] = [_resolve_path(p, base) for p in paths]
        else:
            kwargs["input_paths"] = _resolve_path(paths, base)
    if kwargs.get("label_map_path") is not None:
        kwargs["label_map_path"] = _resolve_path(kwargs["label_map_path"], base)
    if kwargs.get("augment") is None:
        kwargs.pop("augment", None)
    try:
        return PipelineConfig(**kwargs)
    except ConfigError as err:
        raise ConfigError(f"{where}: {err}") from None


# ---------------------------------------------------------------------------------------------
# Object Detection API pipeline.config

_TOP_LEVEL = (
    "model",
    "train_config",
    "train_input_reader",
    "eval_config",
    "eval_input_reader",
    "graph_rewriter",
)

# train_config fields that change the data and that object_input does not implement, with the
# value that leaves the data unchanged. Other train_config fields concern the trainer.
_UNSUPPORTED_TRAIN: dict[str, tuple[Any, ...]] = {
    "merge_multiple_label_boxes": (False,),
    "use_multiclass_scores": (False,),
}

# train_input_reader field → (PipelineConfig field, value type).
_READER_FIELDS: dict[str, tuple[str, type]] = {
    "shuffle": ("shuffle", bool),
    "shuffle_buffer_size": ("shuffle_buffer_size", int),
    "num_epochs": ("num_epochs", int),
    "num_readers": ("num_readers", int),
    "read_block_length": ("read_block_length", int),
    "max_number_of_boxes": ("max_boxes", int),
    "num_keypoints": ("num_keypoints", int),
    "use_display_name": ("use_display_name", bool),
    "load_multiclass_scores": ("multiclass_scores", bool),
}
# Queue and parallelism tuning: tf.data autotunes these.
_READER_IGNORED = (
    "name",
    "filenames_shuffle_buffer_size",
    "num_parallel_batches",
    "num_prefetch_batches",
    "queue_capacity",
    "min_after_dequeue",
    "prefetch_size",
    "num_parallel_map_calls",
    "include_source_id",
)
# Features object_input does not implement, with the values that leave them off.
_READER_UNSUPPORTED: dict[str, tuple[Any, ...]] = {
    "sample_1_of_n_examples": (1,),
    "num_additional_channels": (0,),
    "load_context_features": (False,),
    "load_context_image_ids": (False,),
    "expand_labels_hierarchy": (False,),
    "load_dense_pose": (False,),
    "load_track_id": (False,),
    "load_keypoint_depth_features": (False,),
    "frame_index": (-1,),
    "input_type": ("TF_EXAMPLE", "INPUT_DEFAULT"),
}
_READER_KNOWN = (
    *_READER_FIELDS,
    *_READER_IGNORED,
    *_READER_UNSUPPORTED,
    "label_map_path",
    "load_instance_masks",
    "mask_type",
    "tf_record_input_reader",
    "external_input_reader",
)
_MASK_TYPES = {"DEFAULT": "numerical", "NUMERICAL_MASKS": "numerical", "PNG_MASKS": "png"}

# Repeated fields inside nested messages (the ssd_* ``operations``).
_REPEATED_NESTED = ("min_padded_size_ratio", "max_padded_size_ratio")


def _from_pipeline_config(path: str) -> PipelineConfig:
    root = textproto.parse_file(path)
    textproto.expect_fields(root, _TOP_LEVEL, "a pipeline config")
    train = textproto.one(root, "train_config", None, Message)
    reader = textproto.one(root, "train_input_reader", None, Message)
    if train is None and reader is None:
        raise ConfigError(f"{path}: no train_config or train_input_reader block")
    kwargs: dict[str, Any] = {}
    if train is not None:
        kwargs.update(_train_settings(train))
    if reader is not None:
        kwargs.update(_reader_settings(reader, os.path.dirname(os.path.abspath(path))))
    try:
        config = PipelineConfig(**kwargs)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    if reader is not None and "label_map_path" in reader:
        object.__setattr__(config, "_label_map_where", reader.where("label_map_path"))
    return config


def _checked(msg: Message, field: str, target: str, kind: type) -> Any:
    """The value of ``field``, validated as PipelineConfig field ``target``."""
    value = textproto.one(msg, field, None, kind)
    problem = None if value is None else _problem(target, value)
    if problem:
        raise msg.error(f"{field} {problem}", field)
    return value


def _reject_unsupported(msg: Message, block: str, unsupported: Mapping[str, tuple]) -> None:
    for field, allowed in unsupported.items():
        value = textproto.one(msg, field, allowed[0])
        if value not in allowed:
            raise msg.error(
                f"{block}.{field}: {value!r} is not supported by object_input (remove it or set "
                f"{allowed[0]!r})",
                field,
            )


def _train_settings(train: Message) -> dict[str, Any]:
    for field in train:
        close = difflib.get_close_matches(
            field, ["batch_size", "data_augmentation_options"], 1, 0.8
        )
        if close and close[0] != field:
            raise train.error(
                f"unknown field {field!r} in train_config; did you mean {close[0]!r}?", field
            )
    _reject_unsupported(train, "train_config", _UNSUPPORTED_TRAIN)
    settings: dict[str, Any] = {}
    batch_size = _checked(train, "batch_size", "batch_size", int)
    if batch_size is not None:
        settings["batch_size"] = batch_size
    blocks = textproto.many(train, "data_augmentation_options", Message)
    settings["augment"] = [
        _step_from_block(block, number) for number, block in enumerate(blocks, 1)
    ]
    return settings


def _reader_settings(reader: Message, base: str) -> dict[str, Any]:
    textproto.expect_fields(reader, _READER_KNOWN, "train_input_reader")
    _reject_unsupported(reader, "train_input_reader", _READER_UNSUPPORTED)
    if "external_input_reader" in reader:
        raise reader.error(
            "train_input_reader.external_input_reader is not supported by object_input; "
            "use tf_record_input_reader",
            "external_input_reader",
        )
    settings: dict[str, Any] = {}
    for field, (target, kind) in _READER_FIELDS.items():
        value = _checked(reader, field, target, kind)
        if value is not None:
            settings[target] = value
    if "shuffle" in settings:
        settings["file_shuffle"] = settings["shuffle"]
    label_map_path = textproto.one(reader, "label_map_path", "", str)
    if label_map_path:
        settings["label_map_path"] = _resolve_path(label_map_path, base)
    if textproto.one(reader, "load_instance_masks", False, bool):
        mask_type = textproto.one(reader, "mask_type", "DEFAULT")
        if mask_type not in _MASK_TYPES:
            raise reader.error(
                f"mask_type must be one of {', '.join(_MASK_TYPES)}, got {mask_type!r}",
                "mask_type",
            )
        settings["masks"] = _MASK_TYPES[mask_type]
    records = textproto.one(reader, "tf_record_input_reader", None, Message)
    if records is not None:
        textproto.expect_fields(records, ("input_path",), "tf_record_input_reader")
        paths = textproto.many(records, "input_path", str)
        settings["input_paths"] = [_resolve_path(p, base) for p in paths]
    return settings


def _step_from_block(block: Message, number: int) -> Step:
    """One ``data_augmentation_options`` block as ``{name: params}``, validated."""
    label = f"data_augmentation_options block #{number}"
    count = sum(len(values) for values in block.values())
    if count != 1:
        names = ", ".join(name for name, values in block.items() for _ in values) or "none"
        raise block.error(
            f"{label} must hold exactly one step, found {count} ({names}); "
            "give each step its own data_augmentation_options block"
        )
    ((name, (message,)),) = block.items()
    where = block.where(name)
    try:
        spec = get_step(name)
    except ConfigError as err:
        raise ConfigError(f"{where}: {label}: {err}") from None
    if not isinstance(message, Message):
        raise block.error(f"{label}: step {name!r} must be a message {{ ... }}", name)
    params = _step_params(spec, message)
    try:
        spec.resolve(params)
    except ConfigError as err:
        raise ConfigError(f"{where}: {label}: {err}") from None
    return {name: params}


def _step_params(spec: StepSpec, message: Message) -> dict[str, Any]:
    """Translate a step message into the step's parameters (as its ``od_api_fields`` spell them)."""
    pairs = {p: f for p, f in spec.od_api_fields.items() if isinstance(f, tuple)}
    renames = {f: p for p, f in spec.od_api_fields.items() if isinstance(f, str)}
    paired = {field for fields in pairs.values() for field in fields}
    known = (set(spec.defaults) - set(pairs) - set(renames.values())) | paired | set(renames)
    textproto.expect_fields(message, known, f"step {spec.name!r}")
    params: dict[str, Any] = {}
    for param, (low_field, high_field) in pairs.items():
        given = [f for f in (low_field, high_field) if f in message]
        if not given:
            continue
        default = spec.defaults[param]
        if not isinstance(default, tuple):
            if len(given) == 1:
                missing = high_field if given == [low_field] else low_field
                raise message.error(f"{given[0]} needs {missing} too", given[0])
            default = (None, None)
        params[param] = (
            _plain(textproto.one(message, low_field, default[0])),
            _plain(textproto.one(message, high_field, default[1])),
        )
    for field, values in message.items():
        if field in paired:
            continue
        param = renames.get(field, field)
        if _is_sequence(spec.hints.get(param)):
            params[param] = [_plain(v) for v in values]
        else:
            params[param] = _plain(textproto.one(message, field))
    return params


def _plain(value: Any) -> Any:
    """A parsed value as plain Python: enum identifiers → str, messages → dicts."""
    if isinstance(value, textproto.Identifier):
        return str(value)
    if isinstance(value, Message):
        return {
            name: [_plain(v) for v in values]
            if name in _REPEATED_NESTED
            else _plain(textproto.one(value, name))
            for name, values in value.items()
        }
    return value


def _is_sequence(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_is_sequence(arg) for arg in typing.get_args(hint))
    return origin in (list, tuple, collections.abc.Sequence) or hint in (list, tuple)
