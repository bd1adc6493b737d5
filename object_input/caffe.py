"""A Caffe ``Data`` layer (prototxt) as ``make_dataset`` settings: an LMDB source, the batch size
and Caffe's transformation as a ``caffe_transform`` step.

``make_dataset(config=load_data_layer("train_val.prototxt", phase="TRAIN"))`` then feeds what the
Caffe layer fed, with the same arithmetic. Keywords given to ``make_dataset`` override the layer's
(e.g. ``shuffle=True``: Caffe's Data layer reads in key order).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from object_input import textproto
from object_input.ops.registry import ConfigError, get_step
from object_input.sources.caffe_lmdb import CaffeLMDB
from object_input.textproto import Identifier, Message

PHASES = ("TRAIN", "TEST")

# LayerParameter fields a Data layer may carry.
_LAYER_FIELDS = (
    "name", "type", "top", "bottom", "include", "exclude", "phase", "data_param",
    "transform_param", "loss_weight", "param", "propagate_down",
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


@dataclasses.dataclass(frozen=True)
class DataLayer:
    """A Caffe Data layer's settings, ready for ``make_dataset(config=...)``.

    Attributes:
      name: the layer's name ("" when unnamed).
      phase: "TRAIN" or "TEST": the phase the layer was picked for.
      source: the LMDB database, read in key order as Caffe does.
      batch_size: ``data_param.batch_size``.
      transform: the ``caffe_transform`` parameters (``training`` set from the phase).
      prefetch: ``data_param.prefetch`` (batches) when the prototxt sets it, else None (AUTOTUNE).
    """

    name: str
    phase: str
    source: CaffeLMDB
    batch_size: int
    transform: Mapping[str, Any]
    prefetch: int | None = None

    def to_dataset_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`object_input.make_dataset` for this layer."""
        kwargs: dict[str, Any] = {
            "source": self.source,
            "batch_size": self.batch_size,
            "augment": [("caffe_transform", dict(self.transform))],
            "shuffle": False,
        }
        if self.prefetch is not None:
            kwargs["prefetch"] = self.prefetch
        return kwargs


def load_data_layer(
    prototxt: str | os.PathLike, *, phase: str = "TRAIN", root: str | os.PathLike | None = None
) -> DataLayer:
    """Read a Caffe ``Data`` layer from prototxt text or a file.

    ``prototxt`` holds one ``layer { type: "Data" ... }`` (or just its fields), or a whole net, in
    which case the Data layer of ``phase`` is picked (``include``/``exclude`` rules, as Caffe
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
    data_layers = [layer for layer in layers if textproto.one(layer, "type", "", str) == "Data"]
    if len(layers) == 1 and data_layers:
        return data_layers[0]
    chosen = [layer for layer in data_layers if _in_phase(layer, phase)]
    if len(chosen) == 1:
        return chosen[0]
    where = ", ".join(layer.where() for layer in (chosen or data_layers)) or "none"
    if not chosen:
        others = sorted({textproto.one(layer, "type", "", str) for layer in layers} - {"Data"})
        raise message.error(
            f'no layer of type "Data" in phase {phase} (Data layers at: {where}; other layer '
            f"types: {', '.join(others) or 'none'}); only Data layers (LMDB) are read"
        )
    raise message.error(f"{len(chosen)} Data layers in phase {phase} (at {where}); keep one")


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
    textproto.expect_fields(layer, _LAYER_FIELDS, "a Data layer")
    kind = textproto.one(layer, "type", "", str)
    if kind != "Data":
        raise layer.error(f'layer type {kind!r} is not "Data"; only Data layers are read', "type")
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
    transform = _transform(textproto.one(layer, "transform_param", None, Message), phase, root)
    return DataLayer(
        name=name,
        phase=phase,
        source=CaffeLMDB(source_path),
        batch_size=batch_size,
        transform=transform,
        prefetch=prefetch,
    )


def _transform(message: Message | None, phase: str, root: str) -> dict[str, Any]:
    params: dict[str, Any] = {"training": phase == "TRAIN"}
    if message is None:
        return params
    textproto.expect_fields(message, _TRANSFORM_FIELDS, "transform_param")
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
