"""The step registry imports op modules on demand: a pipeline of the steps ``object_input.ops``
imports itself loads no other op module; an unknown name, a listing or a step registered from
elsewhere loads them all first. Run in a fresh process: this one imported every module already."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys

    import numpy as np

    import object_input as oi
    from object_input.ops import _registry
    from object_input.writers import build_example, write_tfrecords

    def loaded():
        return {m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("object_input.ops.")}

    image = np.full((16, 16, 3), 90, np.uint8)
    example = build_example(image, boxes=[[0.1, 0.1, 0.9, 0.9]], classes=[1])
    path = write_tfrecords([example], sys.argv[1] + "/data")
    steps = ["random_horizontal_flip", "random_crop_image", "random_adjust_brightness"]
    batch = next(iter(oi.make_dataset(path, batch_size=1, image_size=(8, 8), augment=steps)))
    assert batch["image"].shape == (1, 8, 8, 3)
    assert _registry._loaded is None, _registry._loaded
    assert "autoaugment" not in loaded() and "affine" not in loaded(), sorted(loaded())
    assert oi.ops.random_horizontal_flip is _registry.get_step("random_horizontal_flip").fn
    assert _registry._loaded is None

    try:
        _registry.get_step("random_rotate_90")
    except oi.ops.ConfigError as error:
        assert "random_rotation90" in str(error), error
    else:
        raise AssertionError("an unknown step was found")
    assert _registry._loaded == "loaded"
    assert {"autoaugment", "affine", "keras_layer"} <= loaded()
    assert callable(oi.ops.keras_layer), "a step shadows its module's name"
    print(len(oi.ops.registered_steps()))
    """
)

BUILTIN = textwrap.dedent(
    """
    from object_input.ops import register_step

    try:
        @register_step()
        def random_affine(features, *, seed=None):
            return features
    except ValueError as error:
        assert "already registered by object_input.ops.affine" in str(error), error
        print("refused")
    """
)


def _run(script: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


@pytest.mark.slow
def test_a_pipeline_of_the_eager_modules_steps_loads_no_other_op_module(tmp_path):
    from object_input.ops import registered_steps

    assert _run(SCRIPT, str(tmp_path)).splitlines()[-1] == str(len(registered_steps()))


@pytest.mark.slow
def test_a_step_of_elsewhere_cannot_take_a_builtin_name_not_yet_imported():
    assert _run(BUILTIN).splitlines()[-1] == "refused"
