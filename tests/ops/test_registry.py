"""User-registered steps and per-box fields: validation, and alignment through a pipeline."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.config.pipeline_config import load_pipeline_config
from object_input.ops import (
    ConfigError,
    get_step,
    register_step,
    registered_steps,
    unregister_step,
)
from object_input.ops import (
    _fused_color as fused_color,
)
from object_input.ops._batched import DeviceStep
from object_input.ops._device_stage import DeviceStage
from object_input.ops._draws import Draw
from object_input.ops._registry import MOVED, in_range
from object_input.ops.crop import crop_to_window
from object_input.per_example import deferrable_prefix
from object_input.writers import build_example, write_tfrecords


def user_add_constant(features, *, seed=None, amount: float = 10.0):
    """Add ``amount`` to every pixel (a user step for these tests)."""
    del seed
    out = dict(features)
    out[fields.IMAGE] = tf.cast(features[fields.IMAGE], tf.float32) + amount
    return out


def user_tint(features, drawn, *, amount: float = 10.0):
    """Add ``amount`` to every pixel, as its draw says (a user step with a batched form)."""
    del amount
    out = dict(features)
    out[fields.IMAGE] = tf.cast(features[fields.IMAGE], tf.float32) + 255.0 * drawn["delta"]
    return out


def _tint_sample(features, seed, *, amount):
    del features, seed
    return {"delta": tf.constant(amount / 255.0)}


def _tint_apply(images, parameters, *, amount):
    del amount
    return tf.clip_by_value(images + 255.0 * parameters[:, :1, tf.newaxis, tf.newaxis], 0, 255)


USER_TINT_DRAW = Draw(_tint_sample)
# A user colour step's device form that runs in the fused colour pass as a brightness change.
USER_TINT = DeviceStep(
    _tint_apply, size=1, fidelity="exact", fused=lambda params: (fused_color.BRIGHTNESS,)
)


@pytest.fixture(autouse=True, scope="module")
def user_step():
    register_step(kind="color", checks={"amount": in_range(0.0, 255.0)})(user_add_constant)
    yield "user_add_constant"
    unregister_step("user_add_constant")


def test_unregistered_step_is_gone():
    register_step("user_temporary")(user_add_constant)
    assert "user_temporary" in registered_steps()
    unregister_step("user_temporary")
    assert "user_temporary" not in registered_steps()
    with pytest.raises(ConfigError, match="unknown augmentation step"):
        unregister_step("user_temporary")


def test_user_step_is_registered_with_its_defaults():
    spec = get_step("user_add_constant")
    assert "user_add_constant" in registered_steps()
    assert spec.defaults == {"amount": 10.0}
    assert spec.kind == "color"
    assert spec.resolve({"amount": 3}) == {"amount": 3.0}  # ints are accepted for floats


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"amount": "x"}, r"'amount' must be a number"),
        ({"amount": 300.0}, r"'amount' must be in \[0.0, 255.0\]"),
        ({"amont": 1.0}, r"unknown parameter 'amont'"),
    ],
)
def test_user_step_parameters_are_validated(params, message):
    with pytest.raises(ConfigError, match=message):
        get_step("user_add_constant").resolve(params)


def test_bad_step_definitions_are_refused():
    with pytest.raises(TypeError, match="keyword-only"):

        @register_step()
        def positional(features, amount, *, seed=None):
            return features

    with pytest.raises(TypeError, match="unknown parameters"):

        @register_step(checks={"nope": in_range(0, 1)})
        def checked(features, *, seed=None, amount: float = 1.0):
            return features

    with pytest.raises(ValueError, match="kind must be"):
        register_step(kind="colour")
    with pytest.raises(ValueError, match="deferral must be None or one of"):
        register_step(deferral="flip")
    with pytest.raises(ValueError, match="only colour steps can be fused, got kind 'geometry'"):
        register_step(kind="geometry", draw=USER_TINT_DRAW, device=USER_TINT)
    with pytest.raises(ValueError, match="draw applies to steps of one example"):
        register_step(examples=2, draw=USER_TINT_DRAW)
    for facts in ({"od_api_fields": {"nope": "x"}}, {"demo_params": {"nope": 1}}):
        with pytest.raises(TypeError, match=r"name unknown parameters \['nope'\]"):
            register_step(**facts)(user_add_constant)
    with pytest.raises(TypeError, match="output_size names unknown parameter 'size'"):
        register_step(output_size="size")(user_add_constant)
    assert "user_add_constant" in registered_steps()  # the refused ones replaced nothing


def user_top_half(features, *, seed=None, low_high: tuple[float, float] = (0.0, 1.0), tag: int = 0):
    """Keep the top half of the image (a user crop for these tests)."""
    del seed, low_high, tag
    shape = features[fields.IMAGE_SHAPE]
    return crop_to_window(features, 0, 0, shape[0] // 2, shape[1])


@pytest.fixture
def user_facts():
    """Steps whose registrations carry the facts other stages read; nothing else names them."""
    register_step(
        "user_top_half",
        reads=(MOVED,),
        writes=(MOVED,),
        kind="geometry",
        deferral="crop",
        od_api_fields={"low_high": ("low", "high"), "tag": "label"},
        demo_params={"tag": 3},
    )(user_top_half)
    register_step("user_tint", kind="color", draw=USER_TINT_DRAW, device=USER_TINT)(user_tint)
    yield
    unregister_step("user_top_half")
    unregister_step("user_tint")


def test_registration_facts_reach_the_stages_that_read_them(tmp_path, user_facts):
    assert get_step("user_top_half").demo_params == {"tag": 3}
    names = ["random_horizontal_flip", "user_top_half", "random_vertical_flip", "user_tint"]
    assert deferrable_prefix(names) == 2
    start, stage = DeviceStage.split([*names[:3], "user_tint", "random_adjust_hue"])
    assert start == 2 and stage.names == ("random_vertical_flip", "user_tint", "random_adjust_hue")
    assert [len(group) for fused, group in stage.groups(3) if fused] == [2]
    # One registration makes it a part of the compiled colour pass: +10 levels, then no hue.
    stage = DeviceStage.split([("user_tint", {}), ("random_adjust_hue", {"max_delta": 0.0})])[1]
    assert [fused for fused, _ in stage.groups(3)] == [True]
    images = tf.fill([2, 3, 3, 3], 100.0)
    drawn = [stage.prepare({fields.IMAGE: images[0]}, tf.constant([0, i])) for i in range(2)]
    out = stage(images, tf.stack([d[fields.DEVICE_PARAMETERS] for d in drawn]))
    np.testing.assert_allclose(out.numpy(), 110.0, atol=1e-3)
    path = tmp_path / "pipeline.config"
    path.write_text(
        "train_config { data_augmentation_options { user_top_half { low: 0.25 high: 0.5 "
        "label: 7 } } }"
    )
    assert load_pipeline_config(path).augment == [
        {"user_top_half": {"low_high": (0.25, 0.5), "tag": 7}}
    ]


def test_user_step_runs_in_make_dataset(tmp_path):
    image = np.full((4, 4, 3), 100, np.uint8)
    write_tfrecords([build_example(image)], tmp_path / "one")
    batch = next(iter(oi.make_dataset(tmp_path, batch_size=1, augment=[("user_add_constant", {})])))
    np.testing.assert_array_equal(batch[fields.IMAGE].numpy(), np.full((1, 4, 4, 3), 110.0))


@pytest.fixture
def score_field():
    fields.register_per_box_field("image/object/score")
    yield "image/object/score"
    fields.unregister_per_box_field("image/object/score")


def test_user_per_box_field_stays_aligned_through_crop_flip_and_padding(tmp_path, score_field):
    rng = np.random.default_rng(3)
    examples = []
    for index in range(6):
        count = 6
        corner = rng.uniform(0, 0.6, (count, 2))
        size = rng.uniform(0.1, 0.4, (count, 2))
        boxes = np.concatenate([corner, corner + size], axis=1)[:, [0, 1, 2, 3]]
        ids = np.arange(count) + 100 * index
        example = build_example(
            rng.integers(0, 256, (40, 50, 3), dtype=np.uint8),
            boxes=boxes,
            classes=(ids % 7 + 1).tolist(),
            source_id=str(index),
        )
        example.features.feature[score_field].float_list.value.extend(ids.astype(float))
        examples.append(example)
    write_tfrecords(examples, tmp_path / "scored")
    ds = oi.make_dataset(
        tmp_path,
        batch_size=3,
        seed=8,
        num_epochs=3,
        decoding={"extra_features": {score_field: tf.io.VarLenFeature(tf.float32)}},
        augment=[
            "random_horizontal_flip",
            ("random_crop_image", {"min_object_covered": 0.0, "area_range": (0.2, 0.5)}),
        ],
    )
    dropped = 0
    for batch in ds:
        for example in oi.unpad_batch(batch):
            ids = example[score_field].astype(int)
            assert len(ids) == len(example[fields.BOXES]) == len(example[fields.CLASSES])
            np.testing.assert_array_equal(example[fields.CLASSES], ids % 7 + 1)
            assert set(ids // 100) <= {int(example[fields.SOURCE_ID])}
            dropped += 6 - len(ids)
    assert dropped > 0  # the crops really dropped boxes, so the gathering was exercised


def test_builtin_per_box_fields_cannot_be_unregistered():
    with pytest.raises(ValueError, match="built-in"):
        fields.unregister_per_box_field(fields.BOXES)
