"""Google Earth Engine TFRecord exports: the mixer, predictions written back, and stitching.

An image export splits a region into patches of ``patchDimensions`` pixels, one
``tf.train.Example`` per patch, row-major over the region and continuing across the files
``<prefix>-00000.tfrecord.gz``, ``-00001`` ...; the ``<prefix>-mixer.json`` beside them places the
patch grid on the Earth. :class:`~object_input.sources.EarthEngine` reads the patches;
:func:`write_predictions` writes a model's output back in the form ``earthengine upload image``
takes with that mixer; :func:`stitch` assembles patches into one georeferenced array.

Sizes here are ``(height, width)`` like everywhere in object_input; Earth Engine's own
``patchDimensions`` and ``kernelSize`` are ``[width, height]``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields

#: The affine of an unrotated north-up grid of 1-unit pixels with its corner at (0, 0).
IDENTITY_AFFINE = (1.0, 0.0, 0.0, 0.0, -1.0, 0.0)


def pair(name: str, value: int | Sequence[int]) -> tuple[int, int]:
    """``value`` as ``(height, width)`` of positive ints; one int means a square."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    if (
        not isinstance(value, Sequence)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value)
    ):
        raise ValueError(f"{name} must be (height, width) of positive ints, got {value!r}")
    return int(value[0]), int(value[1])


def buffer_of(kernel_size: int | Sequence[int]) -> tuple[int, int]:
    """Pixels an export adds on each side of a patch for ``kernel_size``: ``⌊k/2⌋``."""
    kh, kw = pair("kernel_size", kernel_size)
    return kh // 2, kw // 2


@dataclasses.dataclass(frozen=True)
class Mixer:
    """The georeference of an image export's patch grid (``<prefix>-mixer.json``).

    Attributes:
      crs: the projection's CRS code (e.g. ``"EPSG:4326"``), or its WKT when it has no code.
      affine: ``(xScale, xShear, x0, yShear, yScale, y0)``: pixel ``(col, row)`` of the region
        maps to ``x = xScale·col + xShear·row + x0``, ``y = yShear·col + yScale·row + y0``.
      patch_size: ``(height, width)`` of a patch without its kernel buffer.
      patches_per_row: patches in each row of the grid.
      total_patches: patches in the export.
    """

    crs: str
    affine: tuple[float, float, float, float, float, float]
    patch_size: tuple[int, int]
    patches_per_row: int
    total_patches: int

    def __post_init__(self) -> None:
        if len(self.affine) != 6:
            raise ValueError(f"a mixer affine has 6 numbers, got {self.affine!r}")
        object.__setattr__(self, "affine", tuple(float(a) for a in self.affine))
        object.__setattr__(self, "patch_size", pair("patch_size", tuple(self.patch_size)))
        for name in ("patches_per_row", "total_patches"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"mixer {name} must be a positive integer, got {value!r}")
        if self.total_patches % self.patches_per_row:
            raise ValueError(
                f"mixer totalPatches {self.total_patches} is not a whole number of rows of "
                f"{self.patches_per_row} patches"
            )

    @classmethod
    def load(cls, path: str | os.PathLike) -> Mixer:
        """Read a mixer JSON file (any TensorFlow filesystem: local, ``gs://`` ...)."""
        path = os.fspath(path)
        with tf.io.gfile.GFile(path, "r") as f:
            text = f.read()
        try:
            return cls.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as error:
            detail = f"missing {error}" if isinstance(error, KeyError) else str(error)
            raise ValueError(f"{path}: not an Earth Engine mixer: {detail}") from None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Mixer:
        """A mixer from its parsed JSON."""
        projection = data["projection"]
        crs = projection.get("crs") or projection.get("wkt")
        if not crs:
            raise ValueError("projection has neither 'crs' nor 'wkt'")
        width, height = data["patchDimensions"]
        return cls(
            crs=crs,
            affine=tuple(projection["affine"]["doubleMatrix"]),
            patch_size=(height, width),
            patches_per_row=data["patchesPerRow"],
            total_patches=data["totalPatches"],
        )

    def to_json(self) -> dict[str, Any]:
        """The mixer JSON as Earth Engine writes it."""
        return {
            "projection": {"crs": self.crs, "affine": {"doubleMatrix": list(self.affine)}},
            "patchDimensions": [self.patch_size[1], self.patch_size[0]],
            "patchesPerRow": self.patches_per_row,
            "totalPatches": self.total_patches,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the mixer JSON to ``path``."""
        with tf.io.gfile.GFile(os.fspath(path), "w") as f:
            f.write(json.dumps(self.to_json(), indent=2))

    @property
    def rows(self) -> int:
        """Rows of patches in the grid."""
        return self.total_patches // self.patches_per_row

    def row_col(self, index: int) -> tuple[int, int]:
        """Grid row and column of the patch at ``index`` in export order."""
        if not 0 <= index < self.total_patches:
            raise IndexError(f"patch {index} is outside the export's {self.total_patches} patches")
        return divmod(index, self.patches_per_row)

    def bounds(self, index: int) -> tuple[float, float, float, float]:
        """``(xmin, ymin, xmax, ymax)`` of the unbuffered patch at ``index``, in the CRS."""
        self.row_col(index)
        return tuple(float(v) for v in patch_bounds(self, tf.constant(index, tf.int64)).numpy())


def patch_bounds(mixer: Mixer, index: tf.Tensor) -> tf.Tensor:
    """float64 ``[4]`` ``(xmin, ymin, xmax, ymax)`` of patch ``index`` (int64), in graph mode."""
    height, width = mixer.patch_size
    row, col = index // mixer.patches_per_row, index % mixer.patches_per_row
    px = tf.cast(tf.stack([col, col, col + 1, col + 1]) * width, tf.float64)
    py = tf.cast(tf.stack([row, row + 1, row, row + 1]) * height, tf.float64)
    a, b, c, d, e, f = mixer.affine
    xs, ys = a * px + b * py + c, d * px + e * py + f
    return tf.stack([tf.reduce_min(xs), tf.reduce_min(ys), tf.reduce_max(xs), tf.reduce_max(ys)])


def _patches(items: Iterable[Any]) -> Iterator[tuple[int | None, np.ndarray]]:
    """``(patch index or None, patch)`` one by one from arrays ``[H, W, k]``, batches
    ``[N, H, W, k]``, feature dicts (``IMAGE``, with ``PATCH_INDEX`` when present; batched or
    not), or a dataset of any of those."""
    if isinstance(items, tf.data.Dataset):
        items = items.as_numpy_iterator()
    elif isinstance(items, Mapping) or (
        isinstance(items, (np.ndarray, tf.Tensor)) and np.ndim(items) == 3
    ):
        items = [items]
    for item in items:
        indices = None
        if isinstance(item, Mapping):
            if fields.PATCH_INDEX in item:
                indices = np.asarray(item[fields.PATCH_INDEX]).reshape(-1)
            item = item[fields.IMAGE]
        array = np.asarray(item)
        if array.ndim == 3:
            array = array[None]
        elif array.ndim != 4:
            raise ValueError(
                f"a patch is an array [height, width, bands] (or a batch of them), got shape "
                f"{array.shape}"
            )
        for i, patch in enumerate(array):
            yield (None if indices is None else int(indices[i])), patch


def _unbuffered(
    patch: np.ndarray, index: int, patch_size: tuple[int, int], what: str
) -> np.ndarray:
    """``patch`` without its kernel buffer: the ``patch_size`` centre of an evenly larger array."""
    height, width = patch_size
    extra_h, extra_w = patch.shape[0] - height, patch.shape[1] - width
    if extra_h < 0 or extra_w < 0 or extra_h % 2 or extra_w % 2:
        raise ValueError(
            f"{what} {index} has shape {patch.shape}; expected the patch size "
            f"({height}, {width}) plus an even kernel buffer"
        )
    top, left = extra_h // 2, extra_w // 2
    return patch[top : top + height, left : left + width]


def write_predictions(
    predictions: Iterable[Any],
    out_path: str | os.PathLike,
    mixer: Mixer | str | os.PathLike,
    *,
    band_names: Sequence[str],
    kernel_size: int | Sequence[int] = (1, 1),
) -> int:
    """Write per-patch predictions as the TFRecord ``earthengine upload image`` takes.

    Args:
      predictions: ``[H', W', k]`` arrays in export order (a dataset, a list, or batches
        ``[N, H', W', k]`` such as ``model.predict`` returns); ``H'`` is the patch height plus
        the kernel buffer, or the patch height itself when the model already cropped it. Feature
        dicts (``IMAGE``, ``PATCH_INDEX``) are checked to be in export order.
      out_path: the file to write; GZIP when it ends with ``.gz``.
      mixer: the export's :class:`Mixer` or its path: patch size and count.
      band_names: one name per output band ``k``.
      kernel_size: the export's kernel ``(height, width)``; its buffer is cropped off.

    Returns the number of patches written. Every patch becomes one Example with one float
    feature per band, flattened row-major to the unbuffered patch size. The patches go to a
    temporary file beside ``out_path`` first; only when their count equals the mixer's
    ``totalPatches`` (and every shape fits) is it renamed to ``out_path``, so a wrong count
    raises before anything is written there (a stream's length is known only once consumed).
    """
    if not isinstance(mixer, Mixer):
        mixer = Mixer.load(mixer)
    names = list(band_names)
    if not names or len(set(names)) != len(names):
        raise ValueError(f"band_names must be distinct names, one per band, got {band_names!r}")
    height, width = mixer.patch_size
    buffer_h, buffer_w = buffer_of(kernel_size)
    accepted = {(height + 2 * buffer_h, width + 2 * buffer_w), (height, width)}
    out_path = os.fspath(out_path)
    compression = "GZIP" if out_path.endswith(".gz") else None
    if os.path.dirname(out_path):
        tf.io.gfile.makedirs(os.path.dirname(out_path))
    temp = f"{out_path}.partial-{uuid.uuid4().hex}"
    count = 0
    try:
        with tf.io.TFRecordWriter(temp, options=compression) as writer:
            for index, (claimed, patch) in enumerate(_patches(predictions)):
                if claimed not in (None, index):
                    raise ValueError(
                        f"prediction {index} is for patch {claimed}: predictions must come in "
                        f"export order (read the export unshuffled); nothing was written to "
                        f"{out_path}"
                    )
                if index >= mixer.total_patches:
                    raise ValueError(
                        f"more predictions than the mixer's {mixer.total_patches} patches; nothing "
                        f"was written to {out_path}"
                    )
                if patch.shape[:2] not in accepted or patch.shape[2] != len(names):
                    raise ValueError(
                        f"prediction {index} has shape {patch.shape}; expected "
                        f"({height + 2 * buffer_h}, {width + 2 * buffer_w}, {len(names)}) for "
                        f"kernel_size {kernel_size} (or the unbuffered ({height}, {width}, "
                        f"{len(names)})); nothing was written to {out_path}"
                    )
                inner = _unbuffered(patch, index, mixer.patch_size, "prediction")
                writer.write(_float_example(names, inner))
                count += 1
        if count != mixer.total_patches:
            raise ValueError(
                f"{count} predictions for an export of {mixer.total_patches} patches; nothing was "
                f"written to {out_path}"
            )
        tf.io.gfile.rename(temp, out_path, overwrite=True)
    finally:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.remove(temp)
    return count


def _float_example(names: Sequence[str], patch: np.ndarray) -> bytes:
    """One Example of ``patch`` ``[H, W, bands]``: a float feature per band, row-major."""
    feature = {
        name: tf.train.Feature(
            float_list=tf.train.FloatList(value=patch[..., i].astype(np.float32).ravel())
        )
        for i, name in enumerate(names)
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
        deterministic=True
    )


def stitch(
    patches: Iterable[Any], mixer: Mixer | str | os.PathLike
) -> tuple[np.ndarray, tuple[float, ...]]:
    """One ``[rows·H, cols·W, bands]`` array of all the patches of an export, and its affine.

    ``patches``: arrays ``[H', W', bands]`` in export order (or batches of them), or feature dicts
    from :class:`~object_input.sources.EarthEngine` (e.g. ``make_dataset(source)``, batched or
    not, shuffled or not), which are placed by their ``PATCH_INDEX``. Patches may carry a kernel
    buffer (cropped off: the shape tells how much). The affine (``(xScale, xShear, x0, yShear,
    yScale, y0)``, as in the mixer) maps pixel ``(col, row)`` of the stitched array to the CRS. A
    patch missing, repeated, or beyond the mixer's grid is an error.
    """
    if not isinstance(mixer, Mixer):
        mixer = Mixer.load(mixer)
    height, width = mixer.patch_size
    out = None
    placed = np.zeros(mixer.total_patches, bool)
    for position, (claimed, patch) in enumerate(_patches(patches)):
        index = position if claimed is None else claimed
        if not 0 <= index < mixer.total_patches:
            raise ValueError(f"patch {index} is beyond the mixer's {mixer.total_patches} patches")
        if placed[index]:
            raise ValueError(f"patch {index} comes twice")
        placed[index] = True
        inner = _unbuffered(patch, index, mixer.patch_size, "patch")
        if out is None:
            out = np.zeros(
                (mixer.rows * height, mixer.patches_per_row * width, patch.shape[2]), patch.dtype
            )
        elif inner.shape[2] != out.shape[2]:
            raise ValueError(f"patch {index} has {inner.shape[2]} bands, patch 0 {out.shape[2]}")
        row, col = mixer.row_col(index)
        out[row * height : (row + 1) * height, col * width : (col + 1) * width] = inner
    if not placed.all():
        missing = np.flatnonzero(~placed)
        raise ValueError(
            f"{placed.sum()} patches for an export of {mixer.total_patches}; missing patch "
            f"{missing[0]}" + (f" and {len(missing) - 1} more" if len(missing) > 1 else "")
        )
    return out, mixer.affine


def write_export(
    image: np.ndarray,
    prefix: str | os.PathLike,
    *,
    band_names: Sequence[str],
    patch_size: int | Sequence[int],
    kernel_size: int | Sequence[int] = (1, 1),
    patches_per_file: int | None = None,
    compressed: bool = True,
    affine: Sequence[float] = IDENTITY_AFFINE,
    crs: str = "EPSG:4326",
    default_value: float = 0.0,
) -> list[str]:
    """Write ``image`` ``[H, W, bands]`` as Earth Engine exports it, with its mixer.

    For trying a pipeline without Earth Engine (the docs and examples use it): patches
    row-major, edge patches that do not fit dropped, each buffered by ``⌊k/2⌋`` pixels of its
    neighbours (``default_value`` outside the image), ``patches_per_file`` patches per file
    ``<prefix>-00000.tfrecord[.gz]``, and ``<prefix>-mixer.json`` (folders are created).
    Returns the file paths.
    """
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != len(band_names):
        raise ValueError(
            f"image must be [height, width, bands] with {len(band_names)} bands, got {image.shape}"
        )
    height, width = pair("patch_size", patch_size)
    buffer_h, buffer_w = buffer_of(kernel_size)
    rows, cols = image.shape[0] // height, image.shape[1] // width
    if rows == 0 or cols == 0:
        raise ValueError(f"image {image.shape[:2]} is smaller than one patch {height, width}")
    padded = np.pad(
        image.astype(np.float32),
        ((buffer_h, buffer_h), (buffer_w, buffer_w), (0, 0)),
        constant_values=default_value,
    )
    total = rows * cols
    per_file = patches_per_file or total
    prefix = os.fspath(prefix)
    if os.path.dirname(prefix):
        tf.io.gfile.makedirs(os.path.dirname(prefix))
    suffix = ".tfrecord.gz" if compressed else ".tfrecord"
    paths = []
    for start in range(0, total, per_file):
        path = f"{prefix}-{len(paths):05d}{suffix}"
        with tf.io.TFRecordWriter(path, options="GZIP" if compressed else None) as writer:
            for index in range(start, min(start + per_file, total)):
                row, col = divmod(index, cols)
                patch = padded[
                    row * height : (row + 1) * height + 2 * buffer_h,
                    col * width : (col + 1) * width + 2 * buffer_w,
                ]
                writer.write(_float_example(band_names, patch))
        paths.append(path)
    Mixer(crs, tuple(affine), (height, width), cols, total).save(f"{prefix}-mixer.json")
    return paths
