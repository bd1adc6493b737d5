"""batching="static" means static shapes: the batch dimension is known too."""

import pytest

import object_input as oi
from object_input import fields

STATIC = dict(batch_size=5, image_size=(32, 48), max_boxes=6, batching="static", masks="png")


def varying_fields(spec):
    """Fields whose size varies between examples: each has a ``<name>_shape`` side field."""
    return {name for name in spec if fields.shape_key(name) in spec}


def test_static_batches_have_fully_defined_shapes(synthetic_dir):
    spec = oi.make_dataset(str(synthetic_dir), **STATIC).element_spec
    assert spec[fields.IMAGE].shape == (5, 32, 48, 3)
    assert spec[fields.BOXES].shape == (5, 6, 4)
    assert spec[fields.MASKS].shape == (5, 6, 32, 48)
    assert spec[fields.NUM_BOXES].shape == (5,)
    undefined = {
        name
        for name, value in spec.items()
        if not value.shape.is_fully_defined() and name not in varying_fields(spec)
    }
    assert not undefined, f"static batching left unknown dimensions in {sorted(undefined)}"


def test_static_batching_drops_the_last_smaller_batch(synthetic_dir):
    # 24 examples in batches of 5: four full batches; the 4 examples left over are dropped.
    sizes = [len(b[fields.NUM_BOXES]) for b in oi.make_dataset(str(synthetic_dir), **STATIC)]
    assert sizes == [5, 5, 5, 5]


def test_dynamic_batching_keeps_the_last_batch(synthetic_dir):
    dataset = oi.make_dataset(str(synthetic_dir), batch_size=5)
    assert dataset.element_spec[fields.IMAGE].shape.as_list() == [None, None, None, 3]
    assert [len(b[fields.NUM_BOXES]) for b in dataset] == [5, 5, 5, 5, 4]


def test_static_batching_keeps_every_example_when_asked(synthetic_dir):
    dataset = oi.make_dataset(str(synthetic_dir), drop_remainder=False, **STATIC)
    assert dataset.element_spec[fields.IMAGE].shape.as_list() == [None, 32, 48, 3]
    assert [len(b[fields.NUM_BOXES]) for b in dataset] == [5, 5, 5, 5, 4]


@pytest.mark.parametrize(
    ("keras", "extra"), [(True, {}), ("detection", {"bounding_box_format": "xyxy"})]
)
def test_keras_outputs_of_static_batches_are_static(synthetic_dir, keras, extra):
    dataset = oi.make_dataset(str(synthetic_dir), keras=keras, **STATIC, **extra)
    images, targets = dataset.element_spec
    assert images.shape == (5, 32, 48, 3)
    assert all(spec.shape.is_fully_defined() for spec in targets.values())
    assert targets["boxes"].shape == (5, 6, 4)
