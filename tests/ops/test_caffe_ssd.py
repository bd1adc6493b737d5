"""Caffe SSD's AnnotatedData transform steps: the batch samplers against a direct NumPy
transcription of the fork's SampleBBox / SatisfySampleConstraint / GenerateBatchSamples (written
here from their semantics), constraints held over many draws (hypothesis), emit constraints,
expansion, distortion and resizing on small hand-made cases."""

import math
import random

import numpy as np
import pytest
import tensorflow as tf
from helpers import over_seeds
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import ConfigError, get_step
from object_input.ops._core import split_seed
from object_input.ops.caffe_ssd import (
    SAMPLER_DEFAULTS,
    SSD_BATCH_SAMPLERS,
    caffe_ssd_distort,
    caffe_ssd_resize,
    caffe_ssd_sample,
    expansion,
    sample_window,
)

# --- the fork's sampling in NumPy (boxes as Caffe holds them: xmin, ymin, xmax, ymax) ------------


def np_size(box):
    xmin, ymin, xmax, ymax = box
    return 0.0 if xmax < xmin or ymax < ymin else (xmax - xmin) * (ymax - ymin)


def np_intersection(a, b):
    if b[0] > a[2] or b[2] < a[0] or b[1] > a[3] or b[3] < a[1]:
        return 0.0
    return np_size((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def np_jaccard(a, b):
    inter = np_intersection(a, b)
    return inter / (np_size(a) + np_size(b) - inter)


def np_coverage(a, b):
    """BBoxCoverage(a, b): the share of a inside b."""
    return np_intersection(a, b) / np_size(a)


def np_satisfy(sample, objects, c):
    """SatisfySampleConstraint, loop for loop."""
    kinds = {
        "jaccard_overlap": lambda o: np_jaccard(sample, o),
        "sample_coverage": lambda o: np_coverage(sample, o),
        "object_coverage": lambda o: np_coverage(o, sample),
    }
    given_kinds = [k for k in kinds if c[f"min_{k}"] is not None or c[f"max_{k}"] is not None]
    if not given_kinds:
        return True
    found = False
    for obj in objects:
        for kind in given_kinds:
            value = kinds[kind](obj)
            if c[f"min_{kind}"] is not None and value < c[f"min_{kind}"]:
                break  # the fork's `continue` of the object loop
            if c[f"max_{kind}"] is not None and value > c[f"max_{kind}"]:
                break
            found = True
        if found:
            return True
    return found


def np_sample_bbox(rng, s):
    scale = rng.uniform(s["min_scale"], s["max_scale"])
    min_ratio = max(s["min_aspect_ratio"], scale**2)
    max_ratio = min(s["max_aspect_ratio"], 1 / scale**2)
    ratio = rng.uniform(min_ratio, max_ratio)
    width, height = scale * math.sqrt(ratio), scale / math.sqrt(ratio)
    xmin, ymin = rng.uniform(0, 1 - width), rng.uniform(0, 1 - height)
    return (xmin, ymin, xmin + width, ymin + height)


def np_generate(rng, objects, samplers):
    """GenerateBatchSamples, then the layer's uniform choice; None: no sample."""
    sampled = []
    for given_sampler in samplers:
        s = {**SAMPLER_DEFAULTS, **given_sampler}
        if not s["use_original_image"]:
            continue
        found = 0
        for _ in range(s["max_trials"]):
            if s["max_sample"] is not None and found >= s["max_sample"]:
                break
            box = np_sample_bbox(rng, s)
            if np_satisfy(box, objects, s):
                found += 1
                sampled.append(box)
    return sampled[rng.randrange(len(sampled))] if sampled else None


# --- helpers ---------------------------------------------------------------------------------


def _features(boxes_yx, size=(40, 60)):
    boxes = tf.constant(np.reshape(boxes_yx, [-1, 4]), tf.float32)
    image = tf.zeros([*size, 3], tf.uint8)
    return {
        fields.IMAGE: image,
        fields.IMAGE_SHAPE: tf.constant(size),
        fields.BOXES: boxes,
        fields.CLASSES: tf.range(1, tf.shape(boxes)[0] + 1),
    }


def _tf_windows(boxes_yx, samplers, num, salt=0):
    """``num`` windows of sample_window as (xmin, ymin, xmax, ymax) rows; NaN where unsampled."""
    features = _features(boxes_yx)

    def draw(seed):
        window, sampled = sample_window(features[fields.BOXES], seed, samplers)
        xyxy = tf.gather(window, [1, 0, 3, 2])
        return tf.where(sampled, xyxy, np.nan)

    return over_seeds(draw, salt, num).numpy()


def _np_windows(boxes_yx, samplers, num, seed=0):
    # Python floats and random draws: the loops above run about a million times per call, and
    # NumPy scalars would make them several times slower.
    rng = random.Random(seed)
    objects = [(b[1], b[0], b[3], b[2]) for b in np.reshape(boxes_yx, [-1, 4]).tolist()]
    rows = [np_generate(rng, objects, samplers) for _ in range(num)]
    return np.array([r if r is not None else [np.nan] * 4 for r in rows])


def _ks(a, b):
    """Two-sample Kolmogorov-Smirnov statistic."""
    grid = np.sort(np.concatenate([a, b]))
    cdf = lambda x: np.searchsorted(np.sort(x), grid, side="right") / len(x)  # noqa: E731
    return np.max(np.abs(cdf(a) - cdf(b)))


def _summaries(windows):
    ok = ~np.isnan(windows[:, 0])
    w = windows[ok]
    width, height = w[:, 2] - w[:, 0], w[:, 3] - w[:, 1]
    return ok.mean(), {
        "area": width * height,
        "aspect": width / height,
        "x_centre": (w[:, 0] + w[:, 2]) / 2,
        "y_centre": (w[:, 1] + w[:, 3]) / 2,
    }


OBJECTS = [[0.1, 0.15, 0.35, 0.3], [0.5, 0.55, 0.95, 0.9]]  # ymin, xmin, ymax, xmax
COVERAGE_SAMPLERS = (
    {"min_scale": 0.2, "max_scale": 0.8, "min_aspect_ratio": 0.5, "max_aspect_ratio": 2.0,
     "min_sample_coverage": 0.4, "max_trials": 30},
    {"min_scale": 0.3, "max_scale": 1.0, "min_object_coverage": 0.9, "max_sample": 2,
     "max_trials": 40, "min_aspect_ratio": 0.7, "max_aspect_ratio": 1.3},
    # Two kinds: the fork decides on the first (Jaccard) alone.
    {"min_scale": 0.3, "max_scale": 0.6, "min_jaccard_overlap": 0.2,
     "min_object_coverage": 0.99, "max_trials": 20, "max_sample": 1},
)  # fmt: skip


@pytest.mark.parametrize(
    "samplers, objects",
    [
        pytest.param(SSD_BATCH_SAMPLERS, OBJECTS, marks=pytest.mark.slow),
        # A small object: often no sample.
        pytest.param(SSD_BATCH_SAMPLERS[1:], [[0.4, 0.4, 0.45, 0.47]], marks=pytest.mark.slow),
        (COVERAGE_SAMPLERS, OBJECTS),
    ],
)
def test_crop_distribution_matches_the_fork(samplers, objects):
    num = 3000
    ours = _tf_windows(objects, samplers, num)
    fork = _np_windows(objects, samplers, num)
    sampled_ours, ours_stats = _summaries(ours)
    sampled_fork, fork_stats = _summaries(fork)
    # Binomial standard error at n = 3000 is under 0.01.
    assert abs(sampled_ours - sampled_fork) < 0.04
    for name in ours_stats:
        # The 0.1% critical value of the two-sample KS statistic here is about 0.05.
        assert _ks(ours_stats[name], fork_stats[name]) < 0.06, name


CONSTRAINT_KEYS = [f"{b}_{k}" for k in ("jaccard_overlap", "sample_coverage", "object_coverage")
                   for b in ("min", "max")]  # fmt: skip


@st.composite
def samplers_and_objects(draw):
    low = draw(st.floats(0.1, 1.0))
    high = draw(st.floats(low, 1.0))
    min_ratio = draw(st.floats(0.3, 1.0))
    max_ratio = draw(st.floats(1.0, 3.0))
    # Caffe's aspect range is non-empty only when the scale allows it.
    min_ratio, max_ratio = min(min_ratio, 1 / high**2), max(max_ratio, high**2)
    key = draw(st.sampled_from(CONSTRAINT_KEYS))
    sampler = {
        "min_scale": low,
        "max_scale": high,
        "min_aspect_ratio": min_ratio,
        "max_aspect_ratio": max_ratio,
        key: draw(st.floats(0.0, 1.0)),
        "max_trials": draw(st.integers(1, 30)),
        "max_sample": draw(st.one_of(st.none(), st.integers(1, 3))),
    }
    objects = []
    for _ in range(draw(st.integers(1, 3))):
        y0, x0 = draw(st.floats(0, 0.9)), draw(st.floats(0, 0.9))
        objects.append([y0, x0, draw(st.floats(y0 + 0.05, 1.0)), draw(st.floats(x0 + 0.05, 1.0))])
    return sampler, objects


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(samplers_and_objects(), st.integers(0, 1000))
def test_every_sample_meets_its_sampler(case, salt):
    sampler, objects = case
    windows = _tf_windows(objects, [sampler], 40, salt)
    constraint = {**SAMPLER_DEFAULTS, **sampler}
    xyxy_objects = [(b[1], b[0], b[3], b[2]) for b in objects]
    for window in windows[~np.isnan(windows[:, 0])]:
        width, height = window[2] - window[0], window[3] - window[1]
        scale, ratio = np.sqrt(width * height), width / height
        assert sampler["min_scale"] - 1e-4 <= scale <= sampler["max_scale"] + 1e-4
        assert sampler["min_aspect_ratio"] - 1e-4 <= ratio <= sampler["max_aspect_ratio"] + 1e-4
        assert window.min() >= -1e-6 and window.max() <= 1 + 1e-6
        # Constraints at their bounds may go either way in float32: nudge the bounds outwards.
        loose = {
            k: (v - 1e-4 if k.startswith("min") else v + 1e-4)
            if k in CONSTRAINT_KEYS and v is not None
            else v
            for k, v in constraint.items()
        }
        assert np_satisfy(tuple(window), xyxy_objects, loose)


def test_max_sample_and_no_constraint():
    # One unconstrained trial: always the whole image (SSD's first sampler).
    windows = _tf_windows(OBJECTS, [{"max_sample": 1, "max_trials": 1}], 50)
    np.testing.assert_allclose(windows, np.tile([0, 0, 1, 1], [50, 1]))
    # No object can meet it: never sampled.
    windows = _tf_windows(OBJECTS, [{"min_scale": 0.1, "max_scale": 0.1,
                                     "min_object_coverage": 1.0}], 50)  # fmt: skip
    assert np.isnan(windows).all()


def test_crop_keeps_centred_boxes_projected_exactly():
    boxes = [[0.1, 0.1, 0.3, 0.3], [0.2, 0.5, 0.9, 0.95], [0.05, 0.05, 0.95, 0.95]]
    features = _features(boxes)
    samplers = SSD_BATCH_SAMPLERS[1:]
    for index in range(30):
        seed = tf.constant([index, 7])
        # The step's seed: one half for the expansion (none here), one for the sampling.
        window, sampled = sample_window(features[fields.BOXES], split_seed(seed, 2)[1], samplers)
        out = caffe_ssd_sample(features, seed=seed, batch_samplers=samplers)
        window, b = window.numpy(), np.array(boxes, np.float32)
        centre = (b[:, :2] + b[:, 2:]) / 2
        keep = np.all((centre >= window[:2]) & (centre <= window[2:]), axis=1)
        if not sampled:
            keep[:] = True
        size = np.tile(window[2:] - window[:2], 2)
        expected = np.clip((b[keep] - np.tile(window[:2], 2)) / size, 0, 1)
        np.testing.assert_allclose(out[fields.BOXES], expected, atol=1e-6)
        np.testing.assert_array_equal(out[fields.CLASSES], np.arange(1, 4)[keep])
        height, width = 40, 60
        assert out[fields.IMAGE].shape[:2] == (
            max(int(np.float32(window[2] * height) - np.float32(window[0] * height)), 1),
            max(int(np.float32(window[3] * width) - np.float32(window[1] * width)), 1),
        )


def test_min_overlap_emit():
    features = _features([[0.0, 0.0, 0.5, 0.5], [0.4, 0.4, 1.0, 1.0]])
    sampler = [{"min_scale": 0.5, "max_scale": 0.5, "max_trials": 1}]
    for index in range(20):
        seed = tf.constant([index, 3])
        window = sample_window(features[fields.BOXES], split_seed(seed, 2)[1], sampler)[0].numpy()
        out = caffe_ssd_sample(
            features, seed=seed, batch_samplers=sampler, emit_type="MIN_OVERLAP", emit_overlap=0.3
        )
        b = features[fields.BOXES].numpy()
        low, high = np.maximum(b[:, :2], window[:2]), np.minimum(b[:, 2:], window[2:])
        share = np.prod(np.maximum(high - low, 0), axis=1) / np.prod(b[:, 2:] - b[:, :2], axis=1)
        np.testing.assert_array_equal(out[fields.CLASSES], np.array([1, 2])[share > 0.3])


def test_sampler_errors_name_the_field():
    spec = get_step("caffe_ssd_sample")
    with pytest.raises(ConfigError, match=r"batch_sampler #0 has unknown key 'min_jacard"):
        spec.resolve({"batch_samplers": [{"min_jacard_overlap": 0.5}]})
    with pytest.raises(ConfigError, match=r"batch_sampler #1 .*aspect ratio range is empty"):
        spec.resolve({"batch_samplers": [{}, {"min_aspect_ratio": 1.5, "max_aspect_ratio": 2}]})


# --- expand, distort, resize -----------------------------------------------------------------


@pytest.mark.parametrize("order, fill", [("RGB", [123, 117, 104]), ("BGR", [104, 117, 123])])
def test_expand_places_the_image_on_the_mean(order, fill):
    height, width = 10, 20
    features = _features([[0.2, 0.1, 0.6, 0.5]], (height, width))
    features[fields.IMAGE] = tf.fill([height, width, 3], tf.constant(255, tf.uint8))
    features[fields.CHANNEL_ORDER] = tf.constant(order)
    for index in range(10):
        out = caffe_ssd_sample(
            features,
            seed=tf.constant([index, 1]),
            batch_samplers=[],
            max_expand_ratio=3.0,
            mean_value=[104, 117, 123],
        )
        image = out[fields.IMAGE].numpy()
        new_height, new_width = image.shape[:2]
        assert height <= new_height <= 3 * height and width <= new_width <= 3 * width
        inside = np.argwhere(np.all(image == 255, axis=-1))
        top, left = inside.min(axis=0)
        assert inside.shape[0] == height * width
        assert np.all(image[np.any(image != 255, axis=-1)] == fill)
        corner = np.array([top, left, top, left])
        expected = (corner + np.array([2, 2, 6, 10])) / np.array([new_height, new_width] * 2)
        np.testing.assert_allclose(out[fields.BOXES][0], expected, atol=1e-6)


def test_expansion_then_crop_equals_cutting_the_built_canvas():
    """The step never builds the canvas; its window equals the fork's crop of the built one."""
    rng = np.random.default_rng(2)
    image = rng.integers(0, 256, [30, 40, 3]).astype(np.uint8)
    boxes = np.array([[0.1, 0.2, 0.5, 0.6], [0.4, 0.1, 0.9, 0.5]], np.float32)
    features = _features(boxes, (30, 40))
    features[fields.IMAGE] = tf.constant(image)
    params = {"expand_prob": 0.7, "max_expand_ratio": 4.0, "mean_value": [104, 117, 123]}
    for index in range(20):
        seed = tf.constant([index, 9])
        expand_seed, sample_seed = split_seed(seed, 2)
        corner, canvas = (t.numpy() for t in expansion((30, 40), expand_seed, 0.7, 4.0))
        built = np.tile(np.array([123, 117, 104], np.uint8), [*canvas, 1])
        built[corner[0] : corner[0] + 30, corner[1] : corner[1] + 40] = image
        on_canvas = (boxes * [30, 40, 30, 40] + np.tile(corner, 2)) / np.tile(canvas, 2)
        window = sample_window(tf.constant(on_canvas, tf.float32), sample_seed, SSD_BATCH_SAMPLERS)
        scaled = window[0].numpy() * np.tile(canvas, 2).astype(np.float32)
        top, left = int(scaled[0]), int(scaled[1])
        height, width = int(scaled[2] - scaled[0]), int(scaled[3] - scaled[1])
        out = caffe_ssd_sample(features, seed=seed, **params)
        np.testing.assert_array_equal(
            out[fields.IMAGE], built[top : top + height, left : left + width]
        )


def test_expand_probability_zero_and_ratio_one_do_nothing():
    features = _features([[0.2, 0.1, 0.6, 0.5]])
    for params in ({"expand_prob": 0.0, "max_expand_ratio": 4.0}, {"max_expand_ratio": 1.005}):
        out = caffe_ssd_sample(features, seed=tf.constant([1, 2]), batch_samplers=[], **params)
        np.testing.assert_array_equal(out[fields.IMAGE], features[fields.IMAGE])
        np.testing.assert_array_equal(out[fields.BOXES], features[fields.BOXES])


def _ramp():
    values = np.arange(20 * 30 * 3).reshape(20, 30, 3) % 251
    return tf.constant(values.astype(np.uint8))


def test_distort_nothing_drawn_is_identity_and_brightness_shifts():
    image = _ramp()
    out = caffe_ssd_distort({fields.IMAGE: image}, seed=tf.constant([1, 1]))
    np.testing.assert_array_equal(out[fields.IMAGE], image)
    for index in range(5):
        out = caffe_ssd_distort(
            {fields.IMAGE: image}, seed=tf.constant([index, 2]),
            brightness_prob=1.0, brightness_delta=32.0,
        )  # fmt: skip
        shift = out[fields.IMAGE].numpy().astype(int) - image.numpy()
        unsaturated = (out[fields.IMAGE].numpy() > 0) & (out[fields.IMAGE].numpy() < 255)
        assert out[fields.IMAGE].dtype == tf.uint8
        assert len(np.unique(shift[unsaturated])) == 1 and abs(shift[unsaturated][0]) <= 32


def test_distort_contrast_multiplies_without_the_mean():
    image = _ramp()
    for index in range(5):
        out = caffe_ssd_distort(
            {fields.IMAGE: image}, seed=tf.constant([index, 3]),
            contrast_prob=1.0, contrast_lower=0.5, contrast_upper=1.5,
        )  # fmt: skip
        got, x = out[fields.IMAGE].numpy().astype(float), image.numpy().astype(float)
        unsaturated = got < 255
        factor = np.sum(got * x * unsaturated) / np.sum(x * x * unsaturated)
        assert 0.5 - 0.01 <= factor <= 1.5 + 0.01
        np.testing.assert_allclose(got, np.clip(np.round(x * factor), 0, 255), atol=1)


def test_distort_follows_the_channel_order_and_keeps_gray():
    image = _ramp()
    params = {
        "hue_prob": 1.0, "hue_delta": 18.0, "saturation_prob": 1.0, "saturation_lower": 0.5,
        "saturation_upper": 1.5, "random_order_prob": 0.0,
    }  # fmt: skip
    seed = tf.constant([5, 5])
    rgb = caffe_ssd_distort({fields.IMAGE: image}, seed=seed, **params)[fields.IMAGE]
    bgr = caffe_ssd_distort(
        {fields.IMAGE: image[..., ::-1], fields.CHANNEL_ORDER: tf.constant("BGR")},
        seed=seed,
        **params,
    )[fields.IMAGE]
    np.testing.assert_array_equal(bgr, rgb.numpy()[..., ::-1])
    gray = tf.tile(image[..., :1], [1, 1, 3])
    out = caffe_ssd_distort({fields.IMAGE: gray}, seed=seed, **params)[fields.IMAGE]
    np.testing.assert_array_equal(out, gray)


def test_distort_random_order_permutes_channels():
    image = _ramp()
    seen = set()
    for index in range(12):
        out = caffe_ssd_distort(
            {fields.IMAGE: image}, seed=tf.constant([index, 4]), random_order_prob=1.0
        )[fields.IMAGE].numpy()
        order = tuple(
            next(c for c in range(3) if np.array_equal(out[..., k], image.numpy()[..., c]))
            for k in range(3)
        )
        assert sorted(order) == [0, 1, 2]
        seen.add(order)
    assert len(seen) > 2


def test_distort_gray_image():
    gray = _ramp()[..., :1]
    out = caffe_ssd_distort(
        {fields.IMAGE: gray}, seed=tf.constant([2, 2]), saturation_prob=1.0,
        saturation_lower=0.5, saturation_upper=1.5, random_order_prob=1.0,
    )[fields.IMAGE]  # fmt: skip
    np.testing.assert_array_equal(out, gray)


def test_resize_fit_large_size_and_pad_exact():
    image = tf.constant(np.arange(4 * 8 * 3).reshape(4, 8, 3), tf.uint8)
    features = {
        fields.IMAGE: image,
        fields.IMAGE_SHAPE: tf.constant([4, 8]),
        fields.BOXES: tf.constant([[0.0, 0.0, 1.0, 0.5]]),
    }
    out = caffe_ssd_resize(
        features, seed=tf.constant([0, 0]), height=6, width=6,
        resize_mode="FIT_LARGE_SIZE_AND_PAD", interp_mode=["NEAREST"], pad_value=[1, 2, 3],
    )  # fmt: skip
    resized = tf.image.resize(image, [3, 6], method="nearest").numpy()
    expected = np.tile(np.array([3, 2, 1], np.uint8), [6, 6, 1])  # BGR pad value, RGB image
    expected[1:4] = resized
    np.testing.assert_array_equal(out[fields.IMAGE], expected)
    np.testing.assert_allclose(out[fields.BOXES], [[1 / 6, 0.0, 4 / 6, 0.5]], atol=1e-6)


def test_resize_modes_sizes_and_random_interpolation():
    features = _features(OBJECTS, (40, 60))
    small = caffe_ssd_resize(features, height=30, width=30, resize_mode="FIT_SMALL_SIZE")
    assert small[fields.IMAGE].shape == (30, 45, 3)
    np.testing.assert_array_equal(small[fields.BOXES], features[fields.BOXES])
    for index in range(8):
        warped = caffe_ssd_resize(
            features, seed=tf.constant([index, 0]), height=30, width=20,
            interp_mode=["LINEAR", "AREA", "NEAREST", "CUBIC", "LANCZOS4"],
        )  # fmt: skip
        assert warped[fields.IMAGE].shape == (30, 20, 3)
        assert warped[fields.IMAGE].dtype == tf.uint8
