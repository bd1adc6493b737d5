"""caffe_transform against Caffe's DataTransformer arithmetic (``caffe_db.reference``, written
index by index in NumPy). The op sees an RGB [H, W, C] image (as CaffeLMDB yields it); its float
output is compared exactly, pixel by pixel, after turning it back into planar BGR.
"""

import itertools

import caffe_db
import numpy as np
import pytest
import tensorflow as tf
from caffe_db import planar_bgr, reference
from helpers import seeded_graph
from hypothesis import given, settings
from hypothesis import strategies as st

from object_input import fields
from object_input.ops import ConfigError, caffe_transform, get_step

H, W, C = 6, 7, 3


@pytest.fixture(scope="module")
def datum():
    return np.random.default_rng(0).integers(0, 256, [C, H, W], np.uint8)


@pytest.fixture(scope="module")
def mean_file(tmp_path_factory):
    mean = np.random.default_rng(1).uniform(0, 255, [C, H, W]).astype(np.float32)
    path = tmp_path_factory.mktemp("mean") / "mean.binaryproto"
    path.write_bytes(caffe_db.blob(mean))
    return str(path), mean


def _features(datum, bgr_to_rgb=True):
    hwc = np.transpose(datum, [1, 2, 0])
    image = hwc[..., ::-1] if bgr_to_rgb else hwc
    return {
        fields.IMAGE: tf.constant(np.ascontiguousarray(image)),
        fields.IMAGE_SHAPE: tf.constant([H, W]),
        fields.RECORD_ID: tf.constant("db:00000003_cat.jpg"),
    }


def _outputs(datum, num_seeds=48, **params):
    run = seeded_graph(caffe_transform, _features(datum), **params)
    return [run(_features(datum), tf.constant([s, 9])) for s in range(num_seeds)]


def _match(out, datum, candidates, **ref):
    """The (offset, mirror) candidates whose Caffe output equals ``out`` exactly."""
    got = planar_bgr(out[fields.IMAGE].numpy())
    return [
        (offset, mirror)
        for offset, mirror in candidates
        if np.array_equal(got, reference(datum, offset=offset, mirror=mirror, **ref))
    ]


@pytest.mark.parametrize("phase", ["train", "test"])
def test_mean_file_crop_mirror_scale_match_caffe_every_pixel(datum, mean_file, phase):
    path, mean = mean_file
    crop, training = 4, phase == "train"
    outs = _outputs(
        datum, scale=0.00390625, mirror=True, crop_size=crop, mean_file=path, training=training
    )
    if training:
        offsets = list(itertools.product(range(H - crop + 1), range(W - crop + 1)))
    else:
        offsets = [((H - crop) // 2, (W - crop) // 2)]
    seen = set()
    for out in outs:
        assert out[fields.IMAGE].dtype == tf.float32
        np.testing.assert_array_equal(out[fields.IMAGE_SHAPE], [crop, crop])
        found = _match(
            out,
            datum,
            [(o, m) for o in offsets for m in (False, True)],
            mean=mean,
            scale=0.00390625,
            crop=crop,
        )
        assert len(found) == 1, found
        seen.add(found[0])
    assert {mirror for _, mirror in seen} == {False, True}
    offsets_seen = {offset for offset, _ in seen}
    if training:
        assert len(offsets_seen) >= 8  # of 12 possible
    else:
        assert offsets_seen == set(offsets)


def test_the_test_phase_centre_is_floored(datum):
    crop = 3  # (6 - 3) / 2 = 1.5 -> 1; (7 - 3) / 2 = 2
    out = _outputs(datum, num_seeds=1, crop_size=crop, training=False)[0]
    np.testing.assert_array_equal(
        planar_bgr(out[fields.IMAGE].numpy()), reference(datum, crop=crop, offset=(1, 2))
    )


@pytest.mark.parametrize("values", [[104.0, 117.0, 123.5], [127.5]])
def test_mean_values_are_per_channel_in_bgr_order_or_one_for_all(datum, values):
    out = _outputs(datum, num_seeds=1, mean_value=values, scale=0.017)[0]
    np.testing.assert_array_equal(
        planar_bgr(out[fields.IMAGE].numpy()), reference(datum, mean_values=values, scale=0.017)
    )


def test_a_single_number_mean_value_is_accepted(datum):
    out = _outputs(datum, num_seeds=1, mean_value=10.0)[0]
    np.testing.assert_array_equal(
        planar_bgr(out[fields.IMAGE].numpy()), reference(datum, mean_values=[10.0])
    )


def test_bgr_images_keep_the_mean_in_their_order(datum, mean_file):
    path, mean = mean_file
    features = _features(datum, bgr_to_rgb=False)
    out = caffe_transform(features, seed=[1, 2], mean_file=path, bgr_to_rgb=False)
    got = np.transpose(out[fields.IMAGE].numpy(), [2, 0, 1])
    np.testing.assert_array_equal(got, reference(datum, mean=mean))


def _ordered(datum, order):
    """The example as a source that records its channel order gives it."""
    features = _features(datum, bgr_to_rgb=order == "RGB")
    return dict(features, **{fields.CHANNEL_ORDER: tf.constant(order)})


@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_the_examples_channel_order_orders_the_mean(datum, mean_file, order):
    path, mean = mean_file
    features = _ordered(datum, order)
    eager = caffe_transform(features, seed=[1, 2], mean_file=path, scale=0.5)
    graph = seeded_graph(caffe_transform, features, mean_file=path, scale=0.5)
    for out in (eager, graph(features, tf.constant([1, 2]))):
        image = out[fields.IMAGE].numpy()
        got = planar_bgr(image) if order == "RGB" else np.transpose(image, [2, 0, 1])
        np.testing.assert_array_equal(got, reference(datum, mean=mean, scale=0.5))


def test_force_gray_reads_the_examples_channel_order(datum):
    rgb = caffe_transform(_ordered(datum, "RGB"), seed=[1, 2], force_gray=True)
    bgr = caffe_transform(_ordered(datum, "BGR"), seed=[1, 2], force_gray=True)
    np.testing.assert_array_equal(bgr[fields.IMAGE], rgb[fields.IMAGE])


def test_a_bgr_to_rgb_that_contradicts_the_examples_order_names_both(datum):
    features = _ordered(datum, "RGB")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"00000003_cat.jpg: caffe_transform: bgr_to_rgb=False says the image is BGR, but "
        r"the source made it \W*RGB\W* \(example field channel_order\)",
    ):
        caffe_transform(features, seed=[1, 2], mean_value=[1.0, 2.0, 3.0], bgr_to_rgb=False)
    agreed = caffe_transform(features, seed=[1, 2], mean_value=[1.0, 2.0, 3.0], bgr_to_rgb=True)
    np.testing.assert_array_equal(
        planar_bgr(agreed[fields.IMAGE].numpy()), reference(datum, mean_values=[1.0, 2.0, 3.0])
    )


def test_a_legacy_blob_mean_file_reads_the_same(datum, mean_file, tmp_path):
    path, mean = mean_file
    legacy = tmp_path / "legacy.binaryproto"
    legacy.write_bytes(caffe_db.blob(mean, legacy=True))
    a = caffe_transform(_features(datum), seed=[1, 2], mean_file=path)
    b = caffe_transform(_features(datum), seed=[1, 2], mean_file=str(legacy))
    np.testing.assert_array_equal(a[fields.IMAGE], b[fields.IMAGE])


def test_force_gray_is_opencvs_integer_luma_then_the_transform(datum):
    out = caffe_transform(_features(datum), seed=[1, 2], force_gray=True, mean_value=[100.0])
    b, g, r = (datum[i].astype(np.int64) for i in range(3))
    gray = ((4899 * r + 9617 * g + 1868 * b + (1 << 13)) >> 14).astype(np.uint8)
    exact = 0.299 * r + 0.587 * g + 0.114 * b
    assert np.abs(gray - exact).max() <= 0.5 + 1e-6
    np.testing.assert_array_equal(
        np.transpose(out[fields.IMAGE].numpy(), [2, 0, 1]),
        reference(gray[np.newaxis], mean_values=[100.0]),
    )


def test_force_color_repeats_a_gray_image(datum):
    gray = datum[:1]
    features = {fields.IMAGE: tf.constant(np.transpose(gray, [1, 2, 0]))}
    out = caffe_transform(features, seed=[1, 2], force_color=True, mean_value=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(
        planar_bgr(out[fields.IMAGE].numpy()),
        reference(np.repeat(gray, 3, axis=0), mean_values=[1.0, 2.0, 3.0]),
    )


def test_boxes_follow_the_crop_and_the_mirror(datum):
    features = _features(datum)
    features[fields.BOXES] = tf.constant([[0.0, 0.0, 1.0, 3 / 7]])
    features[fields.CLASSES] = tf.constant([1])
    run = seeded_graph(caffe_transform, features, crop_size=4, mirror=True, training=False)
    for seed in range(8):
        out = run(features, tf.constant([seed, 0]))
        mirrored = bool(_match(out, datum, [((1, 1), True)], crop=4))
        # Columns 0-2 of 7; the window starts at column 1 and is 4 wide: columns 1-2 stay.
        box = [0.0, 0.5, 1.0, 1.0] if mirrored else [0.0, 0.0, 1.0, 0.5]
        np.testing.assert_allclose(out[fields.BOXES].numpy(), [box], atol=1e-6)


def test_invalid_parameters_are_config_errors(mean_file, tmp_path):
    path, _ = mean_file
    spec = get_step("caffe_transform")
    with pytest.raises(ConfigError, match="mean_file or mean_value, not both"):
        spec.resolve({"mean_file": path, "mean_value": [1.0]})
    with pytest.raises(ConfigError, match="mean_file or mean_value, not both"):
        caffe_transform(
            {fields.IMAGE: tf.zeros([2, 2, 3], tf.uint8)}, mean_file=path, mean_value=1.0
        )
    with pytest.raises(ConfigError, match="force_color or force_gray, not both"):
        spec.resolve({"force_color": True, "force_gray": True})
    with pytest.raises(ConfigError, match="one value or one per channel"):
        spec.resolve({"mean_value": [1.0, 2.0]})
    with pytest.raises(ConfigError, match="force_gray leaves one channel"):
        spec.resolve({"force_gray": True, "mean_value": [1.0, 2.0, 3.0]})
    with pytest.raises(ConfigError, match="has 3 channels, the image 1"):
        spec.resolve({"force_gray": True, "mean_file": path})
    with pytest.raises(ConfigError, match=r"mean_file.*No such file"):
        spec.resolve({"mean_file": str(tmp_path / "missing.binaryproto")})
    junk = tmp_path / "junk.binaryproto"
    junk.write_bytes(b"\xff\xff\xff")
    with pytest.raises(ConfigError, match=r"junk.binaryproto: not a Caffe BlobProto"):
        spec.resolve({"mean_file": str(junk)})
    with pytest.raises(ConfigError, match="crop_size"):
        spec.resolve({"crop_size": -1})


def test_bad_images_name_the_record(datum, mean_file):
    path, _ = mean_file
    small = _features(datum)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"00000003_cat.jpg.*crop_size 7"):
        seeded_graph(caffe_transform, small, crop_size=7)(small, tf.constant([1, 1]))
    other = dict(small, **{fields.IMAGE: tf.zeros([5, 7, 3], tf.uint8)})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"00000003_cat.jpg.*mean_file"):
        seeded_graph(caffe_transform, other, mean_file=path)(other, tf.constant([1, 1]))
    with pytest.raises(ValueError, match="3 channels for an image of 1 channels"):
        caffe_transform({fields.IMAGE: tf.zeros([H, W, 1], tf.uint8)}, mean_file=path)


@given(
    height=st.integers(1, 7),
    width=st.integers(1, 7),
    channels=st.sampled_from([1, 3]),
    crop=st.integers(0, 7),
    training=st.booleans(),
    mirror=st.booleans(),
    mean_kind=st.sampled_from(["none", "file", "one value", "per channel"]),
    scale=st.sampled_from([1.0, 0.017, 0.00390625, -2.5]),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40)
def test_any_size_and_settings_match_one_caffe_window(
    tmp_path_factory, height, width, channels, crop, training, mirror, mean_kind, scale, seed
):
    crop = min(crop, height, width)
    rng = np.random.default_rng(seed)
    datum = rng.integers(0, 256, [channels, height, width], np.uint8)
    params, ref = {"scale": scale, "crop_size": crop, "mirror": mirror, "training": training}, {}
    if mean_kind == "file":
        mean = rng.uniform(0, 255, datum.shape).astype(np.float32)
        path = tmp_path_factory.mktemp("mean") / "m.binaryproto"
        path.write_bytes(caffe_db.blob(mean))
        params["mean_file"], ref["mean"] = str(path), mean
    elif mean_kind != "none":
        values = [
            float(v) for v in rng.uniform(0, 255, 1 if mean_kind == "one value" else channels)
        ]
        params["mean_value"], ref["mean_values"] = values, values
    rgb = np.transpose(datum, [1, 2, 0])[..., ::-1]
    out = caffe_transform(
        {fields.IMAGE: tf.constant(np.ascontiguousarray(rgb))}, seed=[seed, 1], **params
    )
    got = planar_bgr(out[fields.IMAGE].numpy())
    offsets = (
        itertools.product(range(height - crop + 1), range(width - crop + 1))
        if training and crop
        else [((height - crop) // 2, (width - crop) // 2)]
    )
    matches = [
        (offset, flipped)
        for offset in offsets
        for flipped in ((False, True) if mirror else (False,))
        if np.array_equal(
            got, reference(datum, scale=scale, crop=crop, offset=offset, mirror=flipped, **ref)
        )
    ]
    assert matches, params
