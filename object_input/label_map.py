"""Label maps: class name ↔ id, from a text label map file or a Python mapping.

A text label map is the Object Detection API format::

    item { id: 1 name: "cat" display_name: "Cat" }
    item { id: 2 name: "dog" }

Caffe SSD's label maps (``labelmap_voc.prototxt``) are read too: their items give the id as
``label``, and label 0 is the background::

    item { name: "none_of_the_above" label: 0 display_name: "background" }
    item { name: "aeroplane" label: 1 display_name: "aeroplane" }

Ids are 1-based: 0 is never a real class. An item with id 0 named ``background`` (which the
Object Detection API allows) is skipped; any other id below 1 is an error, as are duplicate
names, duplicate ids and items without id or name. Errors name the file, line and column.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
from collections.abc import Mapping

from object_input.config import textproto

__all__ = [
    "LabelMapError",
    "format_label_map",
    "label_map_to_names",
    "load_label_map",
    "path_beside",
    "write_label_map",
]

LabelMapSource = str | os.PathLike | Mapping[str, int]

BACKGROUND = "background"
#: The label map file of a dataset: the converters write it beside the shards, and readers of
#: the shards look for it there.
LABEL_MAP_NAME = "label_map.pbtxt"

# StringIntLabelMapItem fields and Caffe SSD's LabelMapItem ``label`` (its id); the ones beyond
# name/id/label/display_name are accepted and unused.
_ITEM_FIELDS = (
    "name",
    "id",
    "label",
    "display_name",
    "keypoints",
    "ancestor_ids",
    "descendant_ids",
    "frequency",
    "instance_count",
)


class LabelMapError(ValueError):
    """A label map is malformed or inconsistent."""


@dataclasses.dataclass(frozen=True)
class _Item:
    id: int
    name: str | None
    display_name: str | None
    where: str

    def label(self, use_display_name: bool) -> str | None:
        if use_display_name and self.display_name:
            return self.display_name
        return self.name


def path_beside(path: str | os.PathLike) -> str:
    """The label map of the dataset ``path`` belongs to: ``LABEL_MAP_NAME`` in its folder
    (``path`` a shard, or a shards' path prefix)."""
    return os.path.join(os.path.dirname(os.fspath(path)), LABEL_MAP_NAME)


def load_label_map(source: LabelMapSource, use_display_name: bool = False) -> dict[str, int]:
    """``{name: id}`` from a text label map path or a mapping (validated), in file order.

    With ``use_display_name``, an item's ``display_name`` is the key when it has one (its
    ``name`` otherwise), as in the Object Detection API's ``use_display_name`` reader option.
    """
    if isinstance(source, Mapping):
        return _check_mapping(source)
    items = _read_items(source)
    result: dict[str, int] = {}
    first: dict[str, _Item] = {}
    for item in items:
        label = item.label(use_display_name)
        if not label:
            wanted = "display_name or name" if use_display_name else "name"
            raise LabelMapError(f"{item.where}: item with id {item.id} has no {wanted}")
        if label in first:
            raise LabelMapError(
                f"{item.where}: duplicate class name {label!r} (ids {first[label].id} and "
                f"{item.id}; first at {first[label].where})"
            )
        first[label] = item
        result[label] = item.id
    return result


def label_map_to_names(
    source: LabelMapSource | Mapping[int, str], use_display_name: bool = True
) -> dict[int, str]:
    """``{id: name}`` sorted by id, for visualisation; display names are used by default.

    ``source`` is a text label map path, a ``{name: id}`` mapping (inverted) or an
    ``{id: name}`` mapping (validated).
    """
    if isinstance(source, Mapping):
        if source and all(isinstance(k, numbers.Integral) for k in source):
            inverted = _check_mapping({name: key for key, name in source.items()}, len(source))
        else:
            inverted = _check_mapping(source)
        return {id_: name for name, id_ in sorted(inverted.items(), key=lambda kv: kv[1])}
    names = {}
    for item in _read_items(source):
        label = item.label(use_display_name)
        if not label:
            raise LabelMapError(f"{item.where}: item with id {item.id} has no name")
        names[item.id] = label
    return dict(sorted(names.items()))


def format_label_map(label_map: Mapping[str, int]) -> str:
    """The text label map of a ``{name: id}`` mapping (validated), one item per id in id order."""
    checked = _check_mapping(label_map)
    items = []
    for name, id_ in sorted(checked.items(), key=lambda kv: kv[1]):
        quoted = name.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        items.append(f'item {{\n  id: {id_}\n  name: "{quoted}"\n}}\n')
    return "".join(items)


def write_label_map(path: str | os.PathLike, label_map: Mapping[str, int]) -> str:
    """Write ``{name: id}`` as a text label map that :func:`load_label_map` reads back exactly."""
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as file:
        file.write(format_label_map(label_map))
    return path


def _read_items(path: str | os.PathLike) -> list[_Item]:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"a label map must be a file path or a {{name: id}} mapping, got {type(path).__name__}"
        )
    try:
        root = textproto.parse_file(path)
        textproto.expect_fields(root, ("item",), "a label map")
        items = []
        seen_ids: dict[int, _Item] = {}
        for index, msg in enumerate(textproto.many(root, "item", textproto.Message)):
            textproto.expect_fields(msg, _ITEM_FIELDS, "a label map item")
            where = root.where("item", index)
            if "id" in msg and "label" in msg:
                raise LabelMapError(
                    f"{msg.where('label')}: item has both id and label (Caffe SSD's name for the "
                    "id); give one"
                )
            id_field = "id" if "id" in msg else "label"
            item = _Item(
                id=textproto.one(msg, id_field, None, int),
                name=textproto.one(msg, "name", None, str),
                display_name=textproto.one(msg, "display_name", None, str),
                where=where,
            )
            if item.id is None:
                raise LabelMapError(f"{where}: item {_describe(item)}has no id (or label)")
            if item.id == 0 and BACKGROUND in (item.name, item.display_name):
                continue
            if item.id < 1:
                raise LabelMapError(
                    f"{msg.where(id_field)}: item {_describe(item)}has id {item.id}; ids start at "
                    f"1 (only an item named {BACKGROUND!r} may have id 0, and it is skipped)"
                )
            if item.id in seen_ids:
                raise LabelMapError(
                    f"{msg.where(id_field)}: duplicate id {item.id} "
                    f"(first at {seen_ids[item.id].where})"
                )
            seen_ids[item.id] = item
            items.append(item)
    except textproto.TextFormatError as err:
        raise LabelMapError(str(err)) from err
    except OSError as err:
        raise LabelMapError(f"cannot read label map {os.fspath(path)!r}: {err}") from err
    if not items:
        raise LabelMapError(f"{os.fspath(path)}: the label map has no items")
    return items


def _describe(item: _Item) -> str:
    return f"{item.name!r} " if item.name else ""


def _check_mapping(mapping: Mapping, size: int | None = None) -> dict[str, int]:
    result: dict[str, int] = {}
    by_id: dict[int, str] = {}
    for name, id_ in mapping.items():
        if not isinstance(name, str) or not name:
            raise LabelMapError(f"label map names must be non-empty strings, got {name!r}")
        if not isinstance(id_, numbers.Integral) or isinstance(id_, bool):
            raise LabelMapError(f"label map id of {name!r} must be an integer, got {id_!r}")
        if id_ < 1:
            raise LabelMapError(f"label map id of {name!r} is {id_}; ids start at 1")
        if int(id_) in by_id:
            raise LabelMapError(
                f"label map id {int(id_)} is given to both {by_id[int(id_)]!r} and {name!r}"
            )
        by_id[int(id_)] = name
        result[name] = int(id_)
    if size is not None and len(result) != size:
        raise LabelMapError("label map names must be unique")
    if not result:
        raise LabelMapError("the label map is empty")
    return result
