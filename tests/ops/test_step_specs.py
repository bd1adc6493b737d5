"""Every registered step keeps to what its StepSpec declares: ``reads``, ``writes`` and ``kind``.

Each step runs on an example holding every built-in field, a user per-box field and a user
raster field with a geometry handler:
- writes: every field it changes, adds or removes is declared in ``writes``;
- reads: changing every field it does not declare in ``reads`` changes none of its writes;
- kind: colour steps change pixel values only, label steps never the image, image steps never
  boxes.
Each runs with its registration's ``demo_params``.
"""

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.ops import _field_handlers as field_handlers
from object_input.ops import get_step, registered_steps

HEATMAP = "test_heatmap"
BOX_ID = "test_box_id"

# Fields a step refuses, left out of its example.
WITHOUT = {
    "keras_layer": (fields.KEYPOINTS, fields.KEYPOINT_VISIBILITIES),
    # Combining steps cannot merge image-level rasters of several examples.
    "mosaic": (HEATMAP,),
    "mixup": (HEATMAP,),
}


@pytest.fixture(scope="module", autouse=True)
def user_fields():
    fields.register_per_box_field(BOX_ID)
    field_handlers.register_handler(HEATMAP, field_handlers.raster_handler(HEATMAP))
    yield
    field_handlers.unregister_handler(HEATMAP)
    fields.unregister_per_box_field(BOX_ID)


def _example():
    rng = np.random.default_rng(0)
    height, width, n = 12, 17, 3
    boxes = np.array([[0.1, 0.2, 0.5, 0.7], [0.4, 0.05, 0.95, 0.4], [0.6, 0.6, 0.9, 0.95]])
    masks = np.zeros([n, height, width], np.uint8)
    for i, (y0, x0, y1, x1) in enumerate(boxes):
        masks[i, int(y0 * height) : int(y1 * height), int(x0 * width) : int(x1 * width)] = 1
    return {
        fields.IMAGE: tf.constant(rng.integers(0, 256, [height, width, 3]), tf.uint8),
        fields.IMAGE_SHAPE: tf.constant([height, width]),
        fields.SOURCE_ID: tf.constant("id"),
        fields.BOXES: tf.constant(boxes, tf.float32),
        fields.CLASSES: tf.constant([1, 2, 1]),
        fields.WEIGHTS: tf.constant([1.0, 0.5, 0.25]),
        fields.AREA: tf.constant([10.0, 20.0, 30.0]),
        fields.IS_CROWD: tf.constant([False, True, False]),
        fields.DIFFICULT: tf.constant([True, False, False]),
        fields.GROUP_OF: tf.constant([False, False, True]),
        fields.MASKS: tf.constant(masks),
        fields.KEYPOINTS: tf.constant(
            (boxes[:, None, :2] + boxes[:, None, 2:]) / 2 + [[0.0], [0.01]], tf.float32
        ),
        fields.KEYPOINT_VISIBILITIES: tf.constant([[True, False]] * n),
        fields.TRACK_IDS: tf.constant([7, 8, 9]),
        fields.MULTICLASS_SCORES: tf.constant(rng.uniform(size=[n, 4]), tf.float32),
        fields.IMAGE_CLASSES: tf.constant([1, 4]),
        BOX_ID: tf.constant([100, 101, 102]),
        HEATMAP: tf.constant(rng.uniform(size=[height, width]), tf.float32),
    }


def _perturbed(value):
    """A different value of the same shape and dtype."""
    if value.dtype == tf.bool:
        return tf.logical_not(value)
    if value.dtype == tf.string:
        return value + "x"
    if value.dtype == tf.uint8:
        return value // 2 + 3
    if value.dtype.is_floating:
        return value * 0.5 + 0.125
    return value + 1


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def _params(name):
    params = dict(get_step(name).demo_params)
    if name == "keras_layer":
        # A layer object cannot be a registration fact: building one imports Keras.
        import keras

        params["layer"] = keras.layers.RandomFlip(bounding_box_format="rel_yxyx", seed=1)
    return params


def _run(spec, features):
    # A combining step gets the example and copies of it as partners.
    given = features if spec.examples == 1 else [features] * spec.examples
    return spec.fn(given, seed=tf.constant([4, 2]), **spec.resolve(_params(spec.name)))


@pytest.mark.parametrize("name", registered_steps())
def test_step_keeps_to_its_spec(name):
    spec = get_step(name)
    features = {k: v for k, v in _example().items() if k not in WITHOUT.get(name, ())}
    try:
        out = _run(spec, features)
    except Exception as error:
        pytest.fail(f"{name} did not run ({error}); give it demo_params in register_step")
    writes = set(spec.written_fields())
    changed = {k for k in set(features) | set(out) if k not in out or k not in features}
    changed |= {k for k in set(features) & set(out) if not _same(features[k], out[k])}
    assert changed <= writes, f"{name} changed undeclared fields {sorted(changed - writes)}"

    reads = set(spec.read_fields())
    others = {k: _perturbed(v) for k, v in features.items() if k not in reads}
    again = _run(spec, {**features, **others})
    for key in writes & set(out):
        assert _same(out[key], again[key]), f"{name}: {key} depends on an undeclared read"

    if spec.kind == "color":
        assert changed <= {fields.IMAGE}, f"{name} (colour) changed {sorted(changed)}"
        assert out[fields.IMAGE].shape == features[fields.IMAGE].shape
    elif spec.kind == "label":
        assert fields.IMAGE not in changed, f"{name} (label) changed the image"
    elif spec.kind == "image":
        assert not changed & set(fields.per_box_fields()), f"{name} moved or dropped boxes"
    else:
        assert spec.kind == "geometry"


@pytest.mark.parametrize("name", registered_steps())
def test_step_runs_on_an_example_without_boxes(name):
    """Classification data (an image and a label) goes through every step."""
    spec = get_step(name)
    image = tf.constant(np.random.default_rng(1).integers(0, 256, [12, 17, 3]), tf.uint8)
    label = tf.constant(3)
    out = _run(
        spec, {fields.IMAGE: image, fields.IMAGE_SHAPE: tf.constant([12, 17]), fields.LABEL: label}
    )
    assert int(out[fields.LABEL]) == 3
    assert not set(out) & set(fields.per_box_fields()), f"{name} invented per-box fields"
    assert out[fields.IMAGE_SHAPE].numpy().tolist() == out[fields.IMAGE].shape[:2]
