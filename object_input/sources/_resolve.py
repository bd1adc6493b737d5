"""From what a user passes as ``source`` to a :class:`Source`: objects, datasets, or paths whose
format comes from ``format=`` or the file suffix."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input.converters.common import IMAGE_EXTENSIONS
from object_input.options import DecodeOptions, ReadOptions
from object_input.sources._base import Source
from object_input.sources._files import list_files
from object_input.sources.dataset import Dataset
from object_input.sources.huggingface import HuggingFace


@dataclasses.dataclass(frozen=True)
class PathOptions:
    """The ``make_dataset`` settings a format factory may use when it builds a source."""

    reading: ReadOptions = dataclasses.field(default_factory=ReadOptions)
    decoding: DecodeOptions = dataclasses.field(default_factory=DecodeOptions)
    label_map: str | os.PathLike | Mapping[str, int] | None = None
    masks: str | None = None
    num_keypoints: int = 0


Factory = Callable[[list[str], PathOptions], Source]


@dataclasses.dataclass(frozen=True)
class _Format:
    suffixes: tuple[str, ...]
    factory: Factory


_FORMATS: dict[str, _Format] = {}


def register_format(name: str, suffixes: Sequence[str], factory: Factory) -> None:
    """Let ``make_dataset`` build a source of format ``name`` from paths with ``suffixes``.

    When formats share a suffix, a path with it gets the one registered first; the others need
    ``format=``.
    """
    _FORMATS[name] = _Format(tuple(suffixes), factory)


def formats() -> dict[str, tuple[str, ...]]:
    """Registered format names and their file suffixes."""
    return {name: fmt.suffixes for name, fmt in sorted(_FORMATS.items())}


def _listing() -> str:
    return ", ".join(
        f"{name} ({' '.join(fmt.suffixes) or 'format= only'})"
        for name, fmt in sorted(_FORMATS.items())
    )


def _format_of(path: str) -> str:
    lower = path.lower()
    # The longest suffix wins: ".tfrecord.gz" over ".gz"; of formats sharing a suffix, the one
    # registered first (".bin": cifar10 before cifar100).
    best = max(
        (
            (len(s), name)
            for name, fmt in _FORMATS.items()
            for s in fmt.suffixes
            if lower.endswith(s)
        ),
        key=lambda match: match[0],
        default=None,
    )
    if best is None:
        convert = _convert_first(path)
        raise ValueError(
            f"cannot tell the format of {path!r} from its suffix"
            + (f": {convert}. Otherwise pass" if convert else "; pass")
            + f" format= or a source object from object_input.sources. Formats: {_listing()}"
        )
    return best[1]


def _convert_first(path: str) -> str:
    """How to convert ``path`` to TFRecords first, when it looks like data that only a
    converter reads (annotations, images, class folders); else ``""``."""
    lower = path.lower().rstrip("/")
    if lower.endswith(".json"):
        what, command = "a COCO annotation file? Convert it", "coco ANNOTATIONS IMAGES -o OUT"
    elif lower.endswith(".xml"):
        what, command = "Pascal VOC annotations? Convert them", "voc VOC_ROOT -o OUT"
    elif lower.endswith(IMAGE_EXTENSIONS):
        what = "images? Convert them, with their annotations,"
        command = "folders ROOT -o OUT (ROOT/<class>/<image>), or convert voc, coco or csv"
    elif tf.io.gfile.isdir(os.path.join(path, "Annotations")):
        what, command = "a Pascal VOC folder? Convert it", "voc VOC_ROOT -o OUT"
    elif tf.io.gfile.isdir(path):
        what, command = "class folders (ROOT/<class>/<image>)? Convert them", "folders ROOT -o OUT"
    else:
        return ""
    return f"{what} to TFRecords first: object-input convert {command} (docs/converters.md)"


def as_source(source: Any, format: str | None = None, options: PathOptions | None = None) -> Source:
    """``source`` as a :class:`Source`.

    A source object is returned as it is (``format`` and the decoding settings of ``options``
    are its own then: setting them here is an error); a ``tf.data.Dataset`` of feature dicts
    becomes a ``Dataset`` source, a Hugging Face ``datasets.Dataset`` or ``IterableDataset`` a
    ``HuggingFace`` source; a path, glob, directory or list of them is listed and read in
    the format named by ``format`` or, failing that, by the files' suffix.
    """
    source = _from_hubs(source)
    if isinstance(source, Source):
        set_here = [
            name
            for name in ("label_map", "masks", "num_keypoints")
            if options is not None and getattr(options, name) != getattr(PathOptions, name)
        ]
        if set_here or format is not None:
            raise ValueError(
                f"{', '.join(set_here) or 'format'} applies to path sources; give it to "
                f"the {type(source).__name__} source instead"
            )
        return source
    if isinstance(source, tf.data.Dataset):
        return Dataset(source)
    if not _is_paths(source):
        raise TypeError(
            "source must be a path, glob, directory, list of them, a tf.data.Dataset, a Hugging "
            "Face datasets.Dataset or a source object from object_input.sources, got "
            f"{type(source).__name__}"
        )
    options = options or PathOptions()
    if format is not None:
        if format not in _FORMATS:
            raise ValueError(f"unknown format {format!r}; formats: {_listing()}")
        suffixes = _FORMATS[format].suffixes
        files = list_files(source, suffixes)
    else:
        try:
            files = list_files(source, [s for fmt in _FORMATS.values() for s in fmt.suffixes])
        except FileNotFoundError as err:
            # A folder of folders (class folders, a VOC tree) lists no file.
            convert = _convert_first(os.fspath(source)) if _is_path(source) else ""
            if not convert or not tf.io.gfile.isdir(source):
                raise
            raise FileNotFoundError(f"{err}, only folders: {convert}") from None
        found = {path: _format_of(path) for path in files}
        names = sorted(set(found.values()))
        if len(names) > 1:
            examples = {name: next(p for p, n in found.items() if n == name) for name in names}
            raise ValueError(
                f"source mixes formats {names} (e.g. {examples}); pass one format at a time"
            )
        format = names[0]
    return _FORMATS[format].factory(files, options)


def _loaded(module: str, *names: str) -> tuple[type, ...]:
    """The classes ``names`` of ``module`` when something imported it; none otherwise (the
    object passed cannot be one of them then, so the module is never imported here)."""
    found = sys.modules.get(module)
    return tuple(c for c in (getattr(found, name, None) for name in names) if isinstance(c, type))


def _from_hubs(source: Any) -> Any:
    """A Hugging Face dataset as a ``HuggingFace`` source; a dict of splits or a TFDS builder,
    which need a split chosen, an error saying how; anything else as it is."""
    if isinstance(source, _loaded("datasets", "Dataset", "IterableDataset")):
        return HuggingFace(source)
    if isinstance(source, _loaded("datasets", "DatasetDict", "IterableDatasetDict")):
        split = _a_split(source)
        raise TypeError(
            f"source is a datasets.{type(source).__name__} of splits {list(source)}: pick one, "
            f"sources.HuggingFace(dataset, split={split!r}) or dataset[{split!r}]"
        )
    if isinstance(source, _loaded("tensorflow_datasets.core", "DatasetBuilder")):
        split = _a_split(source.info.splits)
        raise TypeError(
            f"source is the TFDS builder of {source.info.full_name}: read a split with "
            f"sources.TFDS(builder, split={split!r})"
        )
    return source


def _a_split(splits: Mapping[str, Any]) -> str:
    """A split to name in an example: ``train`` when there is one (or none is known)."""
    return "train" if "train" in splits or not splits else next(iter(splits))


def _is_path(source: Any) -> bool:
    return isinstance(source, (str, os.PathLike))


def _is_paths(source: Any) -> bool:
    if _is_path(source):
        return True
    return (
        isinstance(source, Sequence)
        and not isinstance(source, (bytes, str))
        and all(isinstance(item, (str, os.PathLike)) for item in source)
    )
