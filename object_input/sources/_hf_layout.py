"""How :class:`~object_input.sources.HuggingFace` maps a ``datasets`` dataset's features to
fields: found by name (:data:`object_input.sources._hub_layout.NAMES`) and type, then as
``fields=`` says; a layout it cannot map is a ``LayoutError`` listing the features and a
``fields=`` mapping to pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from object_input import fields
from object_input.sources import _hub_layout as hub_layout

#: The keys of ``fields=`` besides feature fields: the annotated image size, checked.
HEIGHT, WIDTH = "height", "width"
#: What ``fields=`` maps: one value per image, and one per object.
IMAGE_KEYS = (fields.IMAGE, fields.LABEL, fields.COARSE_LABEL, fields.SOURCE_ID, HEIGHT, WIDTH)
OBJECT_KEYS = (fields.BOXES, fields.CLASSES, fields.AREA, fields.IS_CROWD, fields.DIFFICULT)
# The names each key is found under when ``fields=`` does not say, in order of preference.
_NAMES = {
    **hub_layout.NAMES,
    fields.SOURCE_ID: ("image_id",),
    HEIGHT: ("height",),
    WIDTH: ("width",),
}
# What a key's column holds: its list depth (0 per image, 1 per object, 2 per box coordinate)
# and the kind of its values, as they reach the pipeline.
IMAGE, FLOAT, INT, FLAG, ID = "image", "float", "int", "flag", "id"
KINDS = {
    fields.IMAGE: (0, IMAGE),
    fields.LABEL: (0, INT),
    fields.COARSE_LABEL: (0, INT),
    fields.SOURCE_ID: (0, ID),
    HEIGHT: (0, INT),
    WIDTH: (0, INT),
    fields.BOXES: (2, FLOAT),
    fields.CLASSES: (1, INT),
    fields.AREA: (1, FLOAT),
    fields.IS_CROWD: (1, FLAG),
    fields.DIFFICULT: (1, FLAG),
}
# What each kind takes from a datasets ``Value`` dtype (besides a ClassLabel for INT).
_VALUE_DTYPES = {
    FLOAT: ("float", "int", "uint"),
    INT: ("int", "uint"),
    FLAG: ("bool", "int", "uint"),
    ID: ("int", "uint", "string", "large_string"),
    IMAGE: ("binary", "large_binary", "string", "large_string"),
}
INSTALL = "pip install object-input[hf]"


def import_datasets() -> Any:
    try:
        import datasets
    except ImportError as error:
        raise ImportError(
            f"HuggingFace needs the Hugging Face datasets package: {INSTALL}"
        ) from error
    return datasets


def class_names(
    datasets: Any, features: Any, layout: dict[str, str], class_offset: int | None
) -> tuple[dict[str, int] | None, list[str] | None, int]:
    """The label map of the classes, the names of the labels, and the class offset."""
    paths = _paths(features)
    classes = paths[layout[fields.CLASSES]][0] if fields.CLASSES in layout else None
    named = isinstance(classes, datasets.ClassLabel)
    offset = int(named) if class_offset is None else class_offset
    label_map = {n: i + offset for i, n in enumerate(classes.names)} if named else None
    labels = paths[layout[fields.LABEL]][0] if fields.LABEL in layout else None
    label_names = list(labels.names) if isinstance(labels, datasets.ClassLabel) else None
    return label_map, label_names, offset


def _unlisted(feature: Any) -> tuple[Any, int]:
    """A feature without its list levels, and how many there were."""
    datasets = import_datasets()
    depth = 0
    while isinstance(feature, (datasets.List, datasets.LargeList)):
        feature, depth = feature.feature, depth + 1
    return feature, depth


def _paths(features: Mapping[str, Any]) -> dict[str, tuple[Any, int]]:
    """Every column and every key of a column of dicts: ``path -> (innermost feature, list
    depth)``; a list of dicts counts its level for each key."""
    out = {}
    for column, feature in features.items():
        inner, depth = _unlisted(feature)
        out[column] = (inner, depth)
        if isinstance(inner, dict):
            for key, sub in inner.items():
                leaf, sub_depth = _unlisted(sub)
                out[f"{column}.{key}"] = (leaf, depth + sub_depth)
    return out


def _fits(key: str, feature: Any, depth: int) -> bool:
    """Whether a column of ``feature`` at list ``depth`` can hold ``key``."""
    datasets = import_datasets()
    want_depth, kind = KINDS[key]
    if depth != want_depth:
        return False
    if isinstance(feature, datasets.Image):
        return kind == IMAGE
    if isinstance(feature, datasets.ClassLabel):
        return kind in (INT, ID)
    return isinstance(feature, datasets.Value) and feature.dtype.startswith(_VALUE_DTYPES[kind])


def infer_layout(
    features: Mapping[str, Any],
    image_column: str | None,
    objects_column: str | None,
    mapping: Mapping[str, str | None] | None,
) -> dict[str, str]:
    """``{key: path}`` of what to read: found by name and type, then as the caller says."""
    paths = _paths(features)
    given = dict(mapping or {})
    unknown = sorted(set(given) - set(KINDS))
    if unknown:
        raise ValueError(
            f"fields= maps unknown keys {unknown}; the keys are {list(KINDS)} "
            "(one per image, then one per object)"
        )
    if image_column is not None:
        given.setdefault(fields.IMAGE, image_column)
    if objects_column is not None and objects_column not in features:
        raise _error(features, f"objects_column {objects_column!r} is not a column", {})
    group = _group(features, paths, objects_column, given.get(fields.BOXES))
    found = _found(features, paths, group)
    if fields.BOXES not in found and given.get(fields.BOXES) is None:
        found = {k: v for k, v in found.items() if k not in OBJECT_KEYS}
    layout = {k: v for k, v in {**found, **given}.items() if v is not None}
    for key, path in layout.items():
        if path not in paths:
            raise _error(features, f"{key!r} maps to {path!r}, which is no column", layout)
        feature, depth = paths[path]
        if not _fits(key, feature, depth):
            raise _error(
                features,
                f"column {path!r} ({feature}, {depth} list levels) cannot hold {key!r}",
                layout,
            )
    if fields.IMAGE not in layout:
        images = [p for p, (f, d) in paths.items() if _fits(fields.IMAGE, f, d)]
        problem = (
            f"there are several image columns {images}: pass image_column="
            if len(images) > 1
            else "no Image column was found"
        )
        raise _error(features, problem, layout)
    if fields.BOXES in layout:
        labels = _class_labels(paths, group)
        if fields.CLASSES not in layout and fields.CLASSES not in given and labels:
            raise _error(
                features,
                f"it is not clear which of {labels} holds the boxes' classes (None: every box "
                "is class 1)",
                layout,
            )
        return layout
    objects = [k for k in layout if k in OBJECT_KEYS]
    if objects:
        raise _error(features, f"{objects} are mapped but no boxes", layout)
    groups = [
        column
        for column in features
        if isinstance(paths[column][0], dict)
        and any(depth for path, (_, depth) in paths.items() if path.startswith(f"{column}."))
    ]
    if groups and fields.BOXES not in given:
        raise _error(
            features,
            f"column {groups[0]!r} looks like objects, but none of its keys is a box "
            f"({', '.join(_NAMES[fields.BOXES])}: 4 numbers per object)",
            layout,
        )
    return layout


def _group(
    features: Mapping[str, Any],
    paths: dict[str, tuple[Any, int]],
    objects_column: str | None,
    boxes: str | None,
) -> str | None:
    """The column of dicts that holds the objects (None: lists at the top level): the one
    named, the one of the boxes given, or the first with a box key."""
    if objects_column is not None:
        return objects_column
    if boxes is not None:
        column, _, key = boxes.partition(".")
        return column if key else None
    for column in features:
        if isinstance(paths[column][0], dict) and any(
            f"{column}.{name}" in paths for name in _NAMES[fields.BOXES]
        ):
            return column
    return None


def _class_labels(paths: dict[str, tuple[Any, int]], group: str | None) -> list[str]:
    """The per-object ``ClassLabel`` keys of the objects' column (or of the top level)."""
    datasets = import_datasets()
    return [
        path
        for path, (feature, depth) in paths.items()
        if isinstance(feature, datasets.ClassLabel)
        and depth == 1
        and (path.startswith(f"{group}.") if group else "." not in path)
    ]


def _found(
    features: Mapping[str, Any], paths: dict[str, tuple[Any, int]], group: str | None
) -> dict[str, str]:
    """What the columns' names and types say, where they say it unambiguously; the objects'
    keys in ``group`` (or at the top level), the classes the only ``ClassLabel`` there when no
    key is named as classes."""
    found = {}
    datasets = import_datasets()
    images = [c for c in features if isinstance(paths[c][0], datasets.Image) and not paths[c][1]]
    named = [c for name in _NAMES[fields.IMAGE] for c in images if c == name]
    if len(images) == 1 or named:
        found[fields.IMAGE] = (named or images)[0]
    prefix = f"{group}." if group else ""
    for key in (*IMAGE_KEYS[1:], *OBJECT_KEYS):
        names = [prefix + name if key in OBJECT_KEYS else name for name in _NAMES[key]]
        matches = [path for path in names if path in paths and _fits(key, *paths[path])]
        if matches:
            found[key] = matches[0]
    labels = _class_labels(paths, group)
    if fields.CLASSES not in found and len(labels) == 1:
        found[fields.CLASSES] = labels[0]
    return found


def _error(features: Mapping[str, Any], problem: str, layout: Mapping[str, str]) -> ValueError:
    """The error of a layout that cannot be read (:func:`hub_layout.layout_error`)."""
    paths = _paths(features)
    candidates = {
        key: [*(p for p, (f, d) in paths.items() if _fits(key, f, d)), "<column>.<key>"]
        for key in (fields.IMAGE, fields.BOXES, fields.CLASSES)
    }
    return hub_layout.layout_error(
        "HuggingFace cannot read this dataset's layout",
        problem,
        (f"{column}: {feature}" for column, feature in features.items()),
        "{key: column} (a key inside a column as 'column.key'; None: not read)",
        f"HuggingFace(dataset, fields={hub_layout.suggestion(layout, candidates)!r})",
        f"Keys per image: {', '.join(IMAGE_KEYS)}; per object: {', '.join(OBJECT_KEYS)}.",
    )
