"""Helpers shared by the op tests: graph-mode runners, example builders and window checks.

Coordinate examples (:func:`coord_features`) encode their own pixel coordinates in the image
(channel 0 = row + 1, channel 1 = column + 1, channel 2 = 1), so the source region an op kept,
and where it landed in the output, can be read back from the output image
(:func:`read_placement`) and every other field checked against a NumPy reference
(:func:`check_placed`).
"""

import numpy as np
import tensorflow as tf
from hypothesis import strategies as st

from object_input import fields

EPS = 1e-5  # boxes and keypoints this close to a window's edge may go either way

seeds = st.integers(0, 2**31 - 1)


# --- running ops -----------------------------------------------------------------------------


def as_numpy(features):
    """The feature dict with every tensor as a NumPy array."""
    return {k: v.numpy() for k, v in features.items()}


def unknown_spec(features):
    """TensorSpecs of ``features`` with every dimension unknown."""
    return {k: tf.TensorSpec([None] * v.shape.rank, v.dtype) for k, v in features.items()}


def decoded_spec(features):
    """TensorSpecs with every dimension unknown but the coordinate axis of boxes and keypoints,
    as decoded examples have them."""
    spec = {}
    for name, value in features.items():
        dims = [None] * value.shape.rank
        if name in (fields.BOXES, fields.KEYPOINTS):
            dims[-1] = value.shape[-1]
        spec[name] = tf.TensorSpec(dims, value.dtype)
    return spec


def run_in_graph(op, features, **kwargs):
    """Run ``op`` inside a tf.function whose inputs have unknown dimensions (as decoded)."""
    graph = tf.function(lambda f: op(f, **kwargs), input_signature=[decoded_spec(features)])
    return graph(features)


def seeded_graph(op, features, **kwargs):
    """``op`` as a tf.function of (features, seed) whose inputs have every dimension unknown."""
    signature = [unknown_spec(features), tf.TensorSpec([2], tf.int32)]
    return tf.function(lambda f, s: op(f, seed=s, **kwargs), input_signature=signature)


def over_seeds(fn, salt, num=400):
    """``fn(seed)`` for the seeds ``(i, salt)``, ``i < num``, run as one tf.data map; stacked."""
    pairs = tf.data.Dataset.range(num).map(lambda i: tf.stack([i, tf.constant(salt, tf.int64)]))
    return pairs.map(fn).batch(num).get_single_element()


# --- whole-pixel examples: masks that are exactly their boxes -------------------------------


@st.composite
def pixel_examples(draw):
    """Image with boxes on whole pixels and masks filling exactly the boxes; keypoint 0 is each
    box's top-left corner, keypoint 1 is unlabeled (NaN, not visible)."""
    height = draw(st.integers(1, 7))
    width = draw(st.integers(1, 7))
    count = draw(st.integers(0, 3))
    boxes, masks, keypoints = [], [], []
    for _ in range(count):
        y0 = draw(st.integers(0, height - 1))
        y1 = draw(st.integers(y0 + 1, height))
        x0 = draw(st.integers(0, width - 1))
        x1 = draw(st.integers(x0 + 1, width))
        boxes.append([y0 / height, x0 / width, y1 / height, x1 / width])
        mask = np.zeros([height, width], np.uint8)
        mask[y0:y1, x0:x1] = 1
        masks.append(mask)
        keypoints.append([[y0 / height, x0 / width], [np.nan, np.nan]])
    offset = draw(st.integers(0, 250))
    pixels = (np.arange(height * width * 3).reshape(height, width, 3) * 7 + offset) % 256
    return {
        fields.IMAGE: tf.constant(pixels.astype(np.uint8)),
        fields.BOXES: tf.constant(np.reshape(boxes, [count, 4]), tf.float32),
        fields.MASKS: tf.constant(np.reshape(masks, [count, height, width]), tf.uint8),
        fields.KEYPOINTS: tf.constant(np.reshape(keypoints, [count, 2, 2]), tf.float32),
        fields.KEYPOINT_VISIBILITIES: tf.constant(np.tile([[True, False]], [count, 1])),
        fields.CLASSES: tf.range(1, count + 1),
        "box_id": tf.range(count),
    }


def assert_masks_match_boxes(out):
    """``IMAGE_SHAPE`` is the image's size and each mask's foreground rectangle is its box."""
    height, width = out[fields.IMAGE].shape[:2]
    np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [height, width])
    for box, mask in zip(out[fields.BOXES], out[fields.MASKS], strict=True):
        rows = np.flatnonzero(mask.any(axis=1))
        cols = np.flatnonzero(mask.any(axis=0))
        expected = [
            rows[0] / height,
            cols[0] / width,
            (rows[-1] + 1) / height,
            (cols[-1] + 1) / width,
        ]
        np.testing.assert_allclose(box, expected, atol=1e-6)


# --- coordinate examples and the window reference ---------------------------------------------


def coord_image(height, width):
    """A float32 image whose pixels hold (row + 1, column + 1, 1)."""
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return np.stack([rows + 1, cols + 1, np.ones_like(rows)], -1).astype(np.float32)


def coord_features(height, width, boxes, dtype=np.float32):
    """A coordinate image; masks are the rasterized boxes, keypoints their centre and corner."""
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4)
    n = len(boxes)
    ys = (np.arange(height) + 0.5) / height
    xs = (np.arange(width) + 0.5) / width
    in_y = (ys[None] >= boxes[:, :1]) & (ys[None] <= boxes[:, 2:3])
    in_x = (xs[None] >= boxes[:, 1:2]) & (xs[None] <= boxes[:, 3:4])
    masks = (in_y[:, :, None] & in_x[:, None, :]).astype(np.uint8)
    centre = (boxes[:, :2] + boxes[:, 2:]) / 2
    keypoints = np.stack([centre, boxes[:, :2]], 1)
    return {
        fields.IMAGE: tf.constant(coord_image(height, width).astype(dtype)),
        fields.BOXES: tf.constant(boxes),
        fields.CLASSES: tf.constant(np.arange(n, dtype=np.int32) + 1),
        "box_id": tf.constant(np.arange(n, dtype=np.int32) + 100),
        fields.MASKS: tf.constant(masks),
        fields.KEYPOINTS: tf.constant(keypoints),
        fields.KEYPOINT_VISIBILITIES: tf.ones([n, 2], tf.bool),
        fields.IMAGE_CLASSES: tf.constant([5, 6]),
    }


# Boxes with some area, partly outside [0, 1] at times (crops and pads must cope with both).
loose_boxes = st.tuples(
    st.floats(-0.1, 0.95), st.floats(-0.1, 0.95), st.floats(0.02, 0.8), st.floats(0.02, 0.8)
).map(lambda t: [t[0], t[1], t[0] + t[2], t[1] + t[3]])


def coord_examples(min_side, max_side, boxes=loose_boxes, dtype=np.float32):
    """Coordinate examples of ``min_side``..``max_side`` pixels a side with up to 4 boxes."""
    sides = st.integers(min_side, max_side)
    return st.builds(
        coord_features, sides, sides, st.lists(boxes, max_size=4), dtype=st.just(dtype)
    )


def cut(array, top, left, height, width, fill):
    """NumPy reference: the window of an [H, W, ...] array, ``fill`` outside it."""
    out = np.empty((height, width, *array.shape[2:]), array.dtype)
    out[...] = fill
    ys = np.arange(top, top + height)
    xs = np.arange(left, left + width)
    vy = (ys >= 0) & (ys < array.shape[0])
    vx = (xs >= 0) & (xs < array.shape[1])
    out[np.ix_(vy, vx)] = array[np.ix_(ys[vy], xs[vx])]
    return out


def read_placement(image):
    """Which source pixels a coordinate image's output shows, and where.

    Returns ``(region, offset)``: the source region ``(top, left, height, width)`` of the
    content (pixels with channel 2 = 1) and the output pixel ``(row, column)`` it starts at.
    """
    image = np.asarray(image)
    content = np.argwhere(image[..., 2] == 1)
    start, stop = content.min(0), content.max(0) + 1
    top, left = (int(v) - 1 for v in image[start[0], start[1], :2])
    height, width = (int(v) for v in stop - start)
    return (top, left, height, width), (int(start[0]), int(start[1]))


def infer_window(image):
    """(top, left, height, width) of the source window a crop's output shows; it may extend
    beyond the source, where the output holds no content."""
    (top, left, _, _), (row, col) = read_placement(image)
    return top - row, left - col, *np.asarray(image).shape[:2]


def _assert_coords_close(got, expected, size):
    """Normalized coordinates within 1e-4, and within 1e-3 pixels of an image of ``size``."""
    np.testing.assert_allclose(got, expected, atol=1e-4)
    np.testing.assert_allclose(got * size, expected * size, atol=1e-3)


def check_placed(features, out, *, window=None, cropped=True, thresh=None, clip=False):
    """Check ``out`` shows a region of ``features`` placed on a zero canvas, every field alike.

    ``window`` (top, left, height, width) in source pixels: ``out`` is exactly that window (a
    crop; beyond the source it is zero). None: the region and its place on the canvas are read
    back from the image. ``cropped``: the source was cut to the region first, so boxes may be
    dropped, are clipped to it when ``clip``, and keypoints outside it are lost; with ``thresh``
    a box survives iff it overlaps the region with at least ``thresh`` of its area (within EPS;
    None: any boxes may survive, in order). Not ``cropped``: a pure pad keeps every box, and
    keypoints are lost only off the canvas. Returns ``(region, offset)``.
    """
    f = {k: np.asarray(v) for k, v in features.items()}
    o = {k: np.asarray(v) for k, v in out.items()}
    height, width = f[fields.IMAGE].shape[:2]
    if window is None:
        region, offset = read_placement(o[fields.IMAGE])
        canvas = o[fields.IMAGE].shape[:2]
    else:
        region, offset = tuple(window), (0, 0)
        canvas = region[2:]
    top, left, region_h, region_w = region

    def place(array):
        """The expected output for a source ``[H, W, ...]`` array."""
        return cut(cut(array, *region, 0), -offset[0], -offset[1], *canvas, 0)

    np.testing.assert_array_equal(o[fields.IMAGE], place(f[fields.IMAGE]))
    np.testing.assert_array_equal(o[fields.IMAGE_SHAPE], canvas)
    np.testing.assert_array_equal(o[fields.IMAGE_CLASSES], f[fields.IMAGE_CLASSES])

    win = np.array(
        [top / height, left / width, (top + region_h) / height, (left + region_w) / width]
    )
    b = f[fields.BOXES].astype(np.float64)
    ids = list(f["box_id"])
    kept = [ids.index(i) for i in o["box_id"]]
    assert kept == sorted(kept), "surviving boxes changed order"
    if not cropped:
        assert kept == list(range(len(b))), "a pad dropped boxes"
    elif thresh is not None:
        extent = np.minimum(b[:, 2:], win[2:]) - np.maximum(b[:, :2], win[:2])
        fraction = np.prod(np.maximum(extent, 0), 1) / np.prod(b[:, 2:] - b[:, :2], 1)
        must = (extent > EPS).all(1) & (fraction >= thresh + EPS)
        may = (extent > -EPS).all(1) & (fraction >= thresh - EPS)
        assert set(np.flatnonzero(must)) <= set(kept) <= set(np.flatnonzero(may))
    np.testing.assert_array_equal(o[fields.CLASSES], f[fields.CLASSES][kept])

    def to_region(points, pairs):
        """Source-normalized (y, x) pairs → region-normalized."""
        return (points - np.tile(win[:2], pairs)) / np.tile(win[2:] - win[:2], pairs)

    def to_canvas(points, pairs):
        """Region-normalized (y, x) pairs → canvas-normalized."""
        pixels = points * np.tile([region_h, region_w], pairs) + np.tile(offset, pairs)
        return pixels / np.tile(canvas, pairs)

    inner = to_region(b[kept], 2)
    if clip:
        inner = np.clip(inner, 0, 1)
    got = o[fields.BOXES].reshape(-1, 4)
    _assert_coords_close(got, to_canvas(inner, 2), np.tile(canvas, 2))
    for position, index in enumerate(kept):
        np.testing.assert_array_equal(o[fields.MASKS][position], place(f[fields.MASKS][index]))

    inner = to_region(f[fields.KEYPOINTS][kept], 1)
    moved = to_canvas(inner, 1)
    cut_at = inner if cropped else moved
    inside = ((cut_at >= 0) & (cut_at <= 1)).all(-1)
    clear = (np.minimum(np.abs(cut_at), np.abs(cut_at - 1)) > EPS).all(-1)
    got = o[fields.KEYPOINTS]
    np.testing.assert_array_equal(np.isnan(got).all(-1)[clear], ~inside[clear])
    _assert_coords_close(got[clear & inside], moved[clear & inside], np.asarray(canvas))
    np.testing.assert_array_equal(
        o[fields.KEYPOINT_VISIBILITIES][clear],
        inside[clear] & f[fields.KEYPOINT_VISIBILITIES][kept][clear],
    )
    return region, offset
