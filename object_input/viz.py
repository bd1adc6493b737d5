"""Draw decoded, augmented examples: boxes, class names, instance masks and keypoints.

Needs matplotlib (``pip install object-input[viz]``), which is imported only when drawing. Nothing
here touches pyplot's global state: figures are drawn on the Agg canvas directly, so this works
in scripts, tests and servers without a display.

Examples are single, unpadded feature dicts of numpy arrays, as from
:func:`object_input.unpad_batch`.
"""

from __future__ import annotations

import colorsys
import math
import os
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from object_input import fields, wording

__all__ = [
    "CELL_PIXELS",
    "DPI",
    "TITLE_PIXELS",
    "caption",
    "class_color",
    "draw_example",
    "render_grid",
    "require_matplotlib",
]

DPI = 100
CELL_PIXELS = 320  # side of one grid cell in the saved PNG
TITLE_PIXELS = 40  # height of the band above the grid holding render_grid's title
MASK_ALPHA = 0.45
# The golden-ratio step spreads consecutive class ids far apart on the hue circle.
_HUE_STEP = 0.618033988749895


def class_color(class_id: int) -> tuple[float, float, float]:
    """The RGB colour (components on [0, 1]) of a class id; the same id always gets the same."""
    hue = (0.11 + int(class_id) * _HUE_STEP) % 1.0
    return colorsys.hsv_to_rgb(hue, 0.85, 1.0)


def require_matplotlib() -> None:
    """Raise an ImportError that says how to install matplotlib when it is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(
            "drawing examples needs matplotlib: pip install object-input[viz]"
        ) from None


def _display_image(image: np.ndarray) -> tuple[np.ndarray, str | None]:
    """``image`` as uint8 ``[H, W, 3]`` or ``[H, W]`` (with the colour map to show it)."""
    image = np.asarray(image)
    if image.dtype != np.uint8:
        # Float images hold [0, 255] values; augmentation may overshoot slightly.
        image = np.clip(np.rint(image.astype(np.float64)), 0, 255).astype(np.uint8)
    if image.ndim == 3 and image.shape[-1] >= 3:
        return image[..., :3], None
    if image.ndim == 3:
        image = image[..., 0]
    return image, "gray"


def _label_text(class_id: int, class_names: Mapping[int, str] | None) -> str:
    if class_names and class_id in class_names:
        return str(class_names[class_id])
    return str(class_id)


def _text_color(rgb: Sequence[float]) -> str:
    """Black on light backgrounds, white on dark ones (perceived luminance)."""
    luminance = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
    return "black" if luminance > 0.55 else "white"


def draw_example(
    ax: Any, example: Mapping[str, Any], class_names: Mapping[int, str] | None = None
) -> None:
    """Draw one unpadded example on the matplotlib axes ``ax``.

    Shows the image (uint8, or float on [0, 255]; one channel is shown in grey, channels beyond
    the third are ignored), its image-level classes (``image_classes``: classification data) in
    its top-left corner, each box as a rectangle in its class colour with the class name (or id,
    when ``class_names`` lacks it) above its top-left corner, instance masks as translucent
    overlays in the box's colour, and keypoints as dots, skipping unlabeled (NaN) and invisible
    ones. Axes ticks are turned off; the axes keep the image's pixel coordinates.
    """
    require_matplotlib()
    from matplotlib.patches import Rectangle

    image, cmap = _display_image(example[fields.IMAGE])
    height, width = image.shape[:2]
    ax.imshow(image, cmap=cmap, vmin=0, vmax=255, interpolation="nearest")
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(height - 0.5, -0.5)
    ax.set_axis_off()

    image_classes = np.asarray(example.get(fields.IMAGE_CLASSES, ()), np.int64).reshape(-1)
    if image_classes.size:
        color = class_color(int(image_classes[0]))
        ax.text(
            -0.5,
            -0.5,
            ", ".join(_label_text(int(c), class_names) for c in image_classes),
            color=_text_color(color),
            fontsize=9,
            verticalalignment="top",
            bbox={"facecolor": color, "edgecolor": "none", "pad": 2.0},
            clip_on=True,
        )

    boxes = np.asarray(example.get(fields.BOXES, np.zeros((0, 4))), np.float64).reshape(-1, 4)
    num = len(boxes)
    classes = np.asarray(example.get(fields.CLASSES, np.zeros(num, np.int64))).reshape(-1)
    colors = [class_color(int(c)) for c in classes]

    masks = example.get(fields.MASKS)
    if masks is not None and len(masks) and height and width:
        overlay = np.zeros((height, width, 4), np.float32)
        for mask, color in zip(masks, colors, strict=False):
            # Later masks paint over earlier ones where instances overlap.
            overlay[np.asarray(mask)[:height, :width] > 0] = (*color, MASK_ALPHA)
        ax.imshow(overlay, interpolation="nearest")

    # Normalized coordinates scale by the image size; pixel i spans [i - 0.5, i + 0.5] in ax.
    for (ymin, xmin, ymax, xmax), class_id, color in zip(boxes, classes, colors, strict=False):
        top, left = ymin * height - 0.5, xmin * width - 0.5
        ax.add_patch(
            Rectangle(
                (left, top),
                (xmax - xmin) * width,
                (ymax - ymin) * height,
                fill=False,
                edgecolor=color,
                linewidth=1.5,
            )
        )
        # The label sits on the box's top edge, or just inside when that edge is near the top.
        inside = top < 0.06 * max(height, width)
        ax.text(
            left,
            top,
            _label_text(int(class_id), class_names),
            color=_text_color(color),
            fontsize=7,
            verticalalignment="top" if inside else "bottom",
            bbox={"facecolor": color, "edgecolor": "none", "pad": 1.0},
            clip_on=True,
        )

    keypoints = example.get(fields.KEYPOINTS)
    if keypoints is not None and np.size(keypoints):
        points = np.asarray(keypoints, np.float64).reshape(len(keypoints), -1, 2)
        shown = np.all(np.isfinite(points), axis=-1)
        visibilities = example.get(fields.KEYPOINT_VISIBILITIES)
        if visibilities is not None:
            shown &= np.asarray(visibilities, bool).reshape(shown.shape)
        for box_points, box_shown, color in zip(points, shown, colors, strict=False):
            if box_shown.any():
                ax.scatter(
                    box_points[box_shown, 1] * width - 0.5,
                    box_points[box_shown, 0] * height - 0.5,
                    s=14,
                    color=color,
                    edgecolors="white",
                    linewidths=0.6,
                    zorder=3,
                )


def caption(example: Mapping[str, Any], index: int) -> str:
    """The caption of grid cell ``index``: the example's file name (else source id, else
    ``#index``) with its folder, so that files of the same name in two class folders differ;
    then its image size, width x height as ``inspect`` and the converters write it, and its box
    count unless it has no box field, or no box but image classes (classification data):
    ``"rose/1.jpg\\n320x240, 2 boxes"``."""
    name = f"#{index}"
    for key in (fields.FILENAME, fields.SOURCE_ID):
        value = example.get(key)
        if value is not None:
            value = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            if value:
                name = "/".join(value.replace("\\", "/").rstrip("/").split("/")[-2:])
                break
    height, width = np.shape(example[fields.IMAGE])[:2]
    size = f"{width}x{height}"
    num = len(np.asarray(example.get(fields.BOXES, np.zeros((0, 4)))).reshape(-1, 4))
    # Classification data (image classes, no boxes) and examples without a box field: no count.
    if fields.BOXES not in example or (not num and np.size(example.get(fields.IMAGE_CLASSES, ()))):
        return f"{name}\n{size}"
    return f"{name}\n{size}, {wording.count(num, 'box')}"


def render_grid(
    examples: Sequence[Mapping[str, Any]],
    path: str | os.PathLike,
    class_names: Mapping[int, str] | None = None,
    columns: int | None = None,
    title: str | None = None,
) -> str:
    """Draw ``examples`` in a grid and save it as a PNG at ``path``; returns the path.

    ``columns`` defaults to ``ceil(sqrt(len(examples)))``. Each cell is ``CELL_PIXELS`` square,
    captioned by :func:`caption` (file name, image size, box count); a ``title`` adds a
    ``TITLE_PIXELS`` band on top. The PNG is thus ``columns * CELL_PIXELS`` wide and
    ``rows * CELL_PIXELS`` (+ ``TITLE_PIXELS``) high.
    """
    if not examples:
        raise ValueError("render_grid needs at least one example")
    if columns is not None and columns < 1:
        raise ValueError(f"columns must be >= 1, got {columns}")
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    count = len(examples)
    columns = min(columns or math.ceil(math.sqrt(count)), count)
    rows = math.ceil(count / columns)
    title_pixels = TITLE_PIXELS if title else 0
    width_px, height_px = columns * CELL_PIXELS, rows * CELL_PIXELS + title_pixels
    figure = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)
    FigureCanvasAgg(figure)
    if title:
        # Two lines of about 8 px per character fit the band; a longer title is shortened.
        lines = textwrap.wrap(title, width=max(20, width_px // 8))
        if len(lines) > 2:
            lines = [lines[0], textwrap.shorten(" ".join(lines[1:]), max(20, width_px // 8))]
        figure.text(
            0.5,
            1 - title_pixels / 2 / height_px,
            "\n".join(lines),
            ha="center",
            va="center",
            fontsize=9,
        )
    # Explicit cell positions keep the PNG size exact (no tight bbox) and leave caption room.
    caption_px, margin_px = 30, 6
    for index, example in enumerate(examples):
        row, column = divmod(index, columns)
        left = (column * CELL_PIXELS + margin_px) / width_px
        bottom = ((rows - row - 1) * CELL_PIXELS + margin_px) / height_px
        width = (CELL_PIXELS - 2 * margin_px) / width_px
        height = (CELL_PIXELS - 2 * margin_px - caption_px) / height_px
        ax = figure.add_axes((left, bottom, width, height))
        draw_example(ax, example, class_names)
        # A figure text, not an axes title: placing titles measures every axes' ticks, a
        # third of the drawing time of a grid of 16.
        top = bottom + height + 3 / height_px
        figure.text(
            left + width / 2, top, caption(example, index), ha="center", va="bottom", fontsize=8
        )
    path = os.fspath(path)
    figure.savefig(path, dpi=DPI, format="png")
    return path
