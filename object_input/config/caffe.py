"""A Caffe ``Data`` layer, or Caffe SSD's ``AnnotatedData`` layer (prototxt), as ``make_dataset``
settings: an LMDB source, the batch size and Caffe's transformation as steps.

``make_dataset(config=load_data_layer("train_val.prototxt", phase="TRAIN"))`` then feeds what the
Caffe layer fed, with the same arithmetic. Keywords given to ``make_dataset`` override the layer's
(e.g. ``shuffle=True``: Caffe's Data layer reads in key order). An ``AnnotatedData`` layer gives
the SSD steps (:mod:`object_input.ops.caffe_ssd`) before ``caffe_transform``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from object_input.config import textproto
from object_input.config.textproto import Identifier, Message
from object_input.ops._registry import ConfigError, get_step
from object_input.ops.caffe_ssd import EMIT_TYPES
from object_input.sources.caffe_annotated_lmdb import CaffeAnnotatedLMDB
from object_input.sources.caffe_lmdb import CaffeLMDB

PHASES = ("TRAIN", "TEST")
LAYER_TYPES = ("Data", "AnnotatedData")

# LayerParameter fields a Data layer may carry.
_LAYER_FIELDS = (
    "name", "type", "top", "bottom", "include", "exclude", "phase", "data_param",
    "transform_param", "loss_weight", "param", "propagate_down", "annotated_data_param",
)  # fmt: skip
_DATA_FIELDS = ("source", "batch_size", "backend", "prefetch", "rand_skip")
# Old Caffe kept the transformation in data_param; TransformationParameter replaced it.
_MOVED_TO_TRANSFORM = ("scale", "mean_file", "crop_size", "mirror", "force_encoded_color")
# transform_param field -> (kind, repeated)
_TRANSFORM_FIELDS = {
    "scale": (float, False),
    "mirror": (bool, False),
    "crop_size": (int, False),
    "mean_file": (str, False),
    "mean_value": (float, True),
    "force_color": (bool, False),
    "force_gray": (bool, False),
}
_RULE_FIELDS = ("phase", "min_level", "max_level", "stage", "not_stage")
# Caffe SSD: transform_param's message fields (noise_param is refused by name) and the
# AnnotatedData layer's own.
_SSD_TRANSFORM_FIELDS = (
    "resize_param", "distort_param", "expand_param", "emit_constraint", "noise_param",
)  # fmt: skip
_ANNOTATED_FIELDS = ("batch_sampler", "label_map_file", "anno_type")
_BATCH_SAMPLER_FIELDS = (
    "use_original_image", "sampler", "sample_constraint", "max_sample", "max_trials",
)  # fmt: skip
_SAMPLER_FIELDS = ("min_scale", "max_scale", "min_aspect_ratio", "max_aspect_ratio")
_CONSTRAINT_FIELDS = (
    "min_jaccard_overlap", "max_jaccard_overlap", "min_sample_coverage", "max_sample_coverage",
    "min_object_coverage", "max_object_coverage",
)  # fmt: skip
_DISTORT_FIELDS = (
    "brightness_prob", "brightness_delta", "contrast_prob", "contrast_lower", "contrast_upper",
    "hue_prob", "hue_delta", "saturation_prob", "saturation_lower", "saturation_upper",
    "random_order_prob",
)  # fmt: skip
_RESIZE_FIELDS = (
    "prob", "resize_mode", "height", "width", "interp_mode", "pad_mode", "pad_value",
    "height_scale", "width_scale",
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DataLayer:
    """A Caffe Data layer's settings, ready for ``make_dataset(config=...)``.

    Attributes:
      name: the layer's name ("" when unnamed).
      phase: "TRAIN" or "TEST": the phase the layer was picked for.
      source: the LMDB database, read in key order as Caffe does (a
        :class:`~object_input.sources.CaffeAnnotatedLMDB` for an ``AnnotatedData`` layer).
      batch_size: ``data_param.batch_size``.
      transform: the ``caffe_transform`` parameters (``training`` set from the phase).
      prefetch: ``data_param.prefetch`` (batches) when the prototxt sets it, else None (AUTOTUNE).
      ssd_steps: an ``AnnotatedData`` layer's steps before ``caffe_transform``, as
        ``(name, params)``: ``caffe_ssd_distort`` (``distort_param``), ``caffe_ssd_sample``
        (``expand_param``, ``batch_sampler``, ``emit_constraint``) and ``caffe_ssd_resize``
        (``resize_param``), those the prototxt sets, in the fork's order.
      label_map_file: ``annotated_data_param.label_map_file`` (resolved), for class names
        (:func:`object_input.label_map.label_map_to_names` reads it); None when not set.
    """

    name: str
    phase: str
    source: CaffeLMDB
    batch_size: int
    transform: Mapping[str, Any]
    prefetch: int | None = None
    ssd_steps: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    label_map_file: str | None = None

    def to_dataset_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`object_input.make_dataset` for this layer."""
        kwargs: dict[str, Any] = {
            "source": self.source,
            "batch_size": self.batch_size,
            "augment": [
                *((name, dict(params)) for name, params in self.ssd_steps),
                ("caffe_transform", dict(self.transform)),
            ],
            "shuffle": False,
        }
        if self.prefetch is not None:
            kwargs["prefetch"] = self.prefetch
        return kwargs


def load_data_layer(
    prototxt: str | os.PathLike, *, phase: str = "TRAIN", root: str | os.PathLike | None = None
) -> DataLayer:
    """Read a Caffe ``Data`` layer, or Caffe SSD's ``AnnotatedData`` layer, from prototxt text or
    a file.

    ``prototxt`` holds one ``layer { type: "Data" ... }`` (or just its fields), or a whole net, in
    which case the data layer of ``phase`` is picked (``include``/``exclude`` rules, as Caffe
    does). Relative ``source`` and ``mean_file`` paths are relative to ``root`` (Caffe: the
    working directory, the default). Errors name the file, line and field; only the LMDB backend
    is supported.
    """
    phase = phase.upper() if isinstance(phase, str) else phase
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    message = _parse(prototxt)
    layer = _pick_layer(message, phase)
    return _data_layer(layer, phase, os.fspath(root) if root is not None else os.getcwd())


def _parse(prototxt: str | os.PathLike) -> Message:
    if not isinstance(prototxt, (str, os.PathLike)):
        raise TypeError(f"load_data_layer takes prototxt text or a path, got {type(prototxt)}")
    if isinstance(prototxt, os.PathLike) or os.path.isfile(prototxt):
        return textproto.parse_file(prototxt)
    if not any(mark in prototxt for mark in "{:\n"):
        raise FileNotFoundError(f"no prototxt file {prototxt!r}")
    return textproto.parse(prototxt, "<prototxt>")


def _pick_layer(message: Message, phase: str) -> Message:
    if "layers" in message:
        raise message.error(
            "this net uses the V1 'layers' format; upgrade it with Caffe's "
            "upgrade_net_proto_text (object_input reads 'layer { ... }')",
            "layers",
        )
    if "layer" not in message:
        if "type" in message:
            return message  # the fields of one layer, given bare
        raise message.error("no 'layer { ... }' found: give a Data layer or a net prototxt")
    layers = textproto.many(message, "layer", Message)
    data_layers = [
        layer for layer in layers if textproto.one(layer, "type", "", str) in LAYER_TYPES
    ]
    if len(layers) == 1 and data_layers:
        return data_layers[0]
    chosen = [layer for layer in data_layers if _in_phase(layer, phase)]
    if len(chosen) == 1:
        return chosen[0]
    where = ", ".join(layer.where() for layer in (chosen or data_layers)) or "none"
    if not chosen:
        others = sorted(
            {textproto.one(layer, "type", "", str) for layer in layers} - set(LAYER_TYPES)
        )
        raise message.error(
            f'no layer of type "Data" or "AnnotatedData" in phase {phase} (data layers at: '
            f"{where}; other layer types: {', '.join(others) or 'none'}); only Data and "
            "AnnotatedData layers (LMDB) are read"
        )
    raise message.error(f"{len(chosen)} data layers in phase {phase} (at {where}); keep one")


def _in_phase(layer: Message, phase: str) -> bool:
    """Caffe's NetStateRule matching on the phase alone (include wins over exclude)."""
    include = textproto.many(layer, "include", Message)
    exclude = textproto.many(layer, "exclude", Message)
    for rule in include + exclude:
        textproto.expect_fields(rule, _RULE_FIELDS, "include/exclude")
        for name in _RULE_FIELDS[1:]:
            if name in rule:
                raise rule.error(
                    f"{name!r} rules are not supported; only phase selects a layer here", name
                )
    if include:
        return any(_rule_phase(rule) in (None, phase) for rule in include)
    return not any(_rule_phase(rule) in (None, phase) for rule in exclude)


def _rule_phase(rule: Message) -> str | None:
    value = textproto.one(rule, "phase", None)
    if value is not None and (not isinstance(value, Identifier) or value not in PHASES):
        raise rule.error(f"field 'phase' must be TRAIN or TEST, got {value!r}", "phase")
    return value


def _data_layer(layer: Message, phase: str, root: str) -> DataLayer:
    kind = textproto.one(layer, "type", "", str)
    if kind not in LAYER_TYPES:
        raise layer.error(
            f'layer type {kind!r} is not "Data" or "AnnotatedData"; only those are read', "type"
        )
    annotated = kind == "AnnotatedData"
    # annotated_data_param, last, belongs to AnnotatedData layers only.
    known = _LAYER_FIELDS if annotated else _LAYER_FIELDS[:-1]
    textproto.expect_fields(layer, known, f"a {kind} layer")
    name = textproto.one(layer, "name", "", str)
    data = textproto.one(layer, "data_param", None, Message)
    if data is None:
        raise layer.error("the Data layer has no data_param { source: ... batch_size: ... }")
    for old in _MOVED_TO_TRANSFORM:
        if old in data:
            raise data.error(
                f"data_param.{old} is the old place of a transformation setting; move it to "
                "transform_param",
                old,
            )
    textproto.expect_fields(data, _DATA_FIELDS, "data_param")
    backend = textproto.one(data, "backend", None)
    source_path = _resolve(textproto.one(data, "source", kind=str), root)
    if backend is None and not os.path.exists(os.path.join(source_path, "data.mdb")):
        raise data.error(
            "data_param.backend is not set, so Caffe reads LEVELDB, which is not supported; "
            "convert the database to LMDB (convert_imageset --backend=lmdb) and set backend: LMDB"
        )
    if backend is not None and backend != "LMDB":
        raise data.error(
            f"data_param.backend {backend} is not supported: only LMDB databases are read "
            "(convert with convert_imageset --backend=lmdb)",
            "backend",
        )
    batch_size = textproto.one(data, "batch_size", kind=int)
    if batch_size < 1:
        raise data.error(f"data_param.batch_size must be >= 1, got {batch_size}", "batch_size")
    if textproto.one(data, "rand_skip", 0, int):
        raise data.error(
            "data_param.rand_skip is not supported: shard with make_dataset(reading=...) or "
            "shuffle instead",
            "rand_skip",
        )
    prefetch = textproto.one(data, "prefetch", None, int)
    transform_message = textproto.one(layer, "transform_param", None, Message)
    transform = _transform(transform_message, phase, root, annotated)
    common = {
        "name": name,
        "phase": phase,
        "batch_size": batch_size,
        "transform": transform,
        "prefetch": prefetch,
    }
    if not annotated:
        return DataLayer(source=CaffeLMDB(source_path), **common)
    param = textproto.one(layer, "annotated_data_param", None, Message) or Message(
        layer.source, layer.line, layer.column
    )
    textproto.expect_fields(param, _ANNOTATED_FIELDS, "annotated_data_param")
    anno_type = textproto.one(param, "anno_type", None)
    if anno_type not in (None, "BBOX"):
        raise param.error(f"anno_type {anno_type} is not supported: only BBOX", "anno_type")
    label_map_file = textproto.one(param, "label_map_file", None, str)
    return DataLayer(
        source=CaffeAnnotatedLMDB(source_path),
        ssd_steps=_ssd_steps(transform_message, param, transform),
        label_map_file=_resolve(label_map_file, root) if label_map_file is not None else None,
        **common,
    )


def _ssd_steps(
    transform: Message | None, param: Message, transform_params: Mapping[str, Any]
) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The AnnotatedData layer's steps, in the order its load_batch runs them."""
    transform = transform if transform is not None else Message(param.source, 0, 0)
    steps = []
    distort = textproto.one(transform, "distort_param", None, Message)
    if distort is not None:
        params = _scalars(distort, {name: float for name in _DISTORT_FIELDS}, "distort_param")
        steps.append(("caffe_ssd_distort", _checked("caffe_ssd_distort", params, distort)))
    expand = textproto.one(transform, "expand_param", None, Message)
    samplers = [_batch_sampler(m) for m in textproto.many(param, "batch_sampler", Message)]
    if expand is not None or samplers:
        params = {"batch_samplers": samplers, **_emit(transform)}
        if expand is not None:
            kinds = {"prob": float, "max_expand_ratio": float}
            expansion = _scalars(expand, kinds, "expand_param")
            params["expand_prob"] = expansion.get("prob", 1.0)
            params["max_expand_ratio"] = expansion.get("max_expand_ratio", 1.0)
            params["mean_value"] = transform_params.get("mean_value", [])
        steps.append(
            (
                "caffe_ssd_sample",
                _checked("caffe_ssd_sample", params, param if expand is None else expand),
            )
        )
    resize = textproto.one(transform, "resize_param", None, Message)
    if resize is not None:
        steps.append(("caffe_ssd_resize", _resize(resize)))
    return tuple(steps)


def _scalars(message: Message, kinds: Mapping[str, type], what: str) -> dict[str, Any]:
    """The fields of ``message`` that are set, each one value of its kind; others are errors."""
    textproto.expect_fields(message, kinds, what)
    return {
        name: textproto.one(message, name, None, kind)
        for name, kind in kinds.items()
        if name in message
    }


def _checked(step: str, params: dict[str, Any], message: Message) -> dict[str, Any]:
    """``params``, once ``step`` accepts them; a ConfigError located at ``message`` if not."""
    try:
        get_step(step).resolve(params)
    except ConfigError as error:
        raise ConfigError(f"{message.where()}: {error}") from None
    return params


def _batch_sampler(message: Message) -> dict[str, Any]:
    textproto.expect_fields(message, _BATCH_SAMPLER_FIELDS, "batch_sampler")
    sampler = _scalars(
        message,
        {"use_original_image": bool, "max_sample": int, "max_trials": int, "sampler": Message,
         "sample_constraint": Message},
        "batch_sampler",
    )  # fmt: skip
    for name, known in (("sampler", _SAMPLER_FIELDS), ("sample_constraint", _CONSTRAINT_FIELDS)):
        inner = sampler.pop(name, None)
        if inner is not None:
            sampler.update(_scalars(inner, dict.fromkeys(known, float), name))
    return sampler


def _emit(transform: Message) -> dict[str, Any]:
    """``caffe_ssd_sample``'s emit parameters: none without ``emit_constraint`` (Caffe then keeps
    every box the crop overlaps); its ``emit_type`` defaults to CENTER, as in caffe.proto."""
    emit = textproto.one(transform, "emit_constraint", None, Message)
    if emit is None:
        return {"emit_type": None}
    textproto.expect_fields(emit, ("emit_type", "emit_overlap"), "emit_constraint")
    emit_type = str(textproto.one(emit, "emit_type", "CENTER"))
    if emit_type not in EMIT_TYPES:
        raise emit.error(
            f"emit_constraint.emit_type {emit_type} is not one of {', '.join(EMIT_TYPES)}",
            "emit_type",
        )
    return {"emit_type": emit_type, "emit_overlap": textproto.one(emit, "emit_overlap", 0.0, float)}


def _resize(message: Message) -> dict[str, Any]:
    textproto.expect_fields(message, _RESIZE_FIELDS, "resize_param")
    for name in ("height_scale", "width_scale"):
        if textproto.one(message, name, 0, int):
            raise message.error(f"resize_param.{name} is not supported", name)
    if textproto.one(message, "prob", 1.0, float) != 1.0:
        raise message.error(
            "resize_param.prob below 1 leaves some images unresized, of other sizes than the "
            "batch; only prob: 1 is supported",
            "prob",
        )
    pad_mode = textproto.one(message, "pad_mode", "CONSTANT")
    if pad_mode != "CONSTANT":
        raise message.error(
            f"resize_param.pad_mode {pad_mode} is not supported: only CONSTANT", "pad_mode"
        )
    params = {
        "height": textproto.one(message, "height", kind=int),
        "width": textproto.one(message, "width", kind=int),
        "resize_mode": str(textproto.one(message, "resize_mode", "WARP")),
        "interp_mode": [str(mode) for mode in textproto.many(message, "interp_mode")] or ["LINEAR"],
        "pad_value": textproto.many(message, "pad_value", float),
    }
    return _checked("caffe_ssd_resize", params, message)


def _transform(
    message: Message | None, phase: str, root: str, annotated: bool = False
) -> dict[str, Any]:
    params: dict[str, Any] = {"training": phase == "TRAIN"}
    if message is None:
        return params
    extra = _SSD_TRANSFORM_FIELDS if annotated else ()
    textproto.expect_fields(message, (*_TRANSFORM_FIELDS, *extra), "transform_param")
    if "noise_param" in message:
        raise message.error("transform_param.noise_param is not supported", "noise_param")
    for name, (kind, repeated) in _TRANSFORM_FIELDS.items():
        if name not in message:
            continue
        params[name] = (
            textproto.many(message, name, kind)
            if repeated
            else textproto.one(message, name, None, kind)
        )
    if "mean_file" in params:
        params["mean_file"] = _resolve(params["mean_file"], root)
    try:
        get_step("caffe_transform").resolve(params)
    except ConfigError as error:
        raise ConfigError(f"{message.where()}: transform_param: {error}") from None
    return params


def _resolve(path: str, root: str) -> str:
    return os.path.normpath(os.path.join(root, os.path.expanduser(path)))
