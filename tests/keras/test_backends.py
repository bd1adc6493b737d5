"""The batched forms on Keras's JAX and PyTorch backends: the same pixels as on TensorFlow,
inside a model that builds and fits.

Keras fixes its backend per process, so the other side runs in a subprocess with
``KERAS_BACKEND=jax`` or ``torch``; batches and parameters are prepared here, on TensorFlow, and
travel as arrays both ways.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import textwrap
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.ops import _backend as backend
from object_input.ops import get_step, registered_steps
from object_input.ops._device_stage import DeviceStage

SIZE = (20, 28)
BATCH = 4
DEVICE_STEPS = sorted(name for name in registered_steps() if get_step(name).device is not None)
# Beyond each step's demo parameters: the non-default branches of the forms.
EXTRA = [
    ("random_rotation", {"max_angle": 40.0, "interpolation": "NEAREST", "fill_value": 9.0}),
    ("random_cutout", {"probability": 0.8, "num_patches": 2, "fill_value": None}),
    ("random_distort_color", {"color_ordering": 1}),
    ("autoaugment_image", {"policy_name": "v2"}),
    ("randaugment_detection", {"magnitude": 9, "num_layers": 3}),
]
CASES = [(name, dict(get_step(name).demo_params)) for name in DEVICE_STEPS] + EXTRA
# 1/255 of the [0, 255] range.
TOLERANCE = 1.0

# The other backend's side: argv is the directory, the backend and whether the layer compiles.
_OTHER_SIDE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import keras
    assert keras.backend.backend() == sys.argv[2], keras.backend.backend()
    from object_input.keras.layers import DeviceAugmentation

    directory, jit_compile = sys.argv[1], sys.argv[3] == "jit"
    numpy = keras.ops.convert_to_numpy
    cases = json.load(open(f"{directory}/cases.json"))
    data = np.load(f"{directory}/inputs.npz")
    outputs = {}
    for index, (name, params) in enumerate(cases):
        layer = DeviceAugmentation([[name, params]], jit_compile=jit_compile)
        images, parameters = data[f"images_{index}"], data[f"parameters_{index}"]
        outputs[f"out_{index}"] = numpy(layer((images, parameters), training=True))
    np.savez(f"{directory}/outputs.npz", **outputs)

    # At inference the images pass through as float32; a batch dict gives up its parameters.
    passed = numpy(layer((images.astype(np.uint8), parameters), training=False))
    assert passed.dtype == np.float32, passed.dtype
    assert np.array_equal(passed, images.astype(np.uint8)), "inference changed the images"
    batch = layer({"image": images, "device_parameters": parameters, "n": parameters[:, :1]})
    assert sorted(batch) == ["image", "n"], sorted(batch)
    np.testing.assert_array_equal(numpy(batch["image"]), outputs[f"out_{index}"])
    """
)


def _batch(augment: list, salt: int) -> tuple[np.ndarray, np.ndarray]:
    """A prepared batch of textured images with boxes, and its parameters, on TensorFlow."""
    stage = DeviceStage.required(augment, "test")
    rng = np.random.default_rng(salt)
    rows, cols = np.mgrid[0 : SIZE[0], 0 : SIZE[1]].astype(np.float32)
    prepared = []
    for index in range(BATCH):
        image = np.stack(
            [rows * 255 / SIZE[0], cols * 255 / SIZE[1], rng.uniform(0, 255, SIZE)], axis=-1
        ).astype(np.float32)
        features = {
            fields.IMAGE: tf.constant(image),
            fields.BOXES: tf.constant([[0.1, 0.1, 0.6, 0.5], [0.3, 0.4, 0.9, 0.95]]),
            fields.CLASSES: tf.constant([1, 2], tf.int32),
            fields.NUM_DROPPED_BOXES: tf.constant(0, tf.int32),
        }
        prepared.append(stage.prepare(features, tf.constant([index, salt])))
    images = np.stack([p[fields.IMAGE].numpy() for p in prepared])
    parameters = np.stack([p[fields.DEVICE_PARAMETERS].numpy() for p in prepared])
    return images, parameters


def _require(module: str) -> None:
    """Skip without ``module`` on a developer's machine; under CI (``CI`` set), which installs
    JAX (the test extra) and PyTorch (``.ci/run``), fail instead: a missing backend is a
    broken CI, not a pass."""
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is not installed, and CI runs this backend's tests")
        pytest.skip(f"{module} is not installed")


def _run(keras_backend: str, script: str, directory: pathlib.Path, *args: str) -> None:
    """``script`` in a subprocess on ``keras_backend``, on the CPU."""
    _require(keras_backend)
    env = {
        **os.environ,
        "KERAS_BACKEND": keras_backend,
        "JAX_PLATFORMS": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
    }
    result = subprocess.run(
        [sys.executable, "-c", script, str(directory), keras_backend, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-4000:]


# JAX compiles each step list (jax.jit); PyTorch runs them eagerly here, as torch.compile takes
# seconds per step list on a CPU: the fit test below checks its compiled pixels.
@pytest.mark.slow
@pytest.mark.parametrize("keras_backend, compiled", [("jax", "jit"), ("torch", "eager")])
def test_every_device_step_gives_the_tensorflow_pixels(tmp_path, keras_backend, compiled):
    from object_input.keras.layers import DeviceAugmentation

    inputs, expected = {}, []
    for index, (name, params) in enumerate(CASES):
        images, parameters = _batch([(name, params)], salt=index)
        inputs[f"images_{index}"], inputs[f"parameters_{index}"] = images, parameters
        layer = DeviceAugmentation([(name, params)])
        expected.append(np.asarray(layer((images, parameters), training=True)))
    np.savez(tmp_path / "inputs.npz", **inputs)
    (tmp_path / "cases.json").write_text(json.dumps(CASES))
    _run(keras_backend, _OTHER_SIDE, tmp_path, compiled)
    outputs = np.load(tmp_path / "outputs.npz")
    for index, (name, params) in enumerate(CASES):
        got = outputs[f"out_{index}"]
        assert got.shape == expected[index].shape and got.dtype == np.float32, name
        difference = np.abs(got - expected[index]).max()
        assert difference <= TOLERANCE, f"{name} {params}: max difference {difference}"
    # The cases change pixels: a form that did nothing on either side would pass vacuously.
    changed = [
        name
        for index, (name, _) in enumerate(CASES)
        if np.abs(expected[index] - inputs[f"images_{index}"]).max() > 1.0
    ]
    assert len(changed) >= len(CASES) - 2, changed


# The model compiles its steps (jax.jit; torch.compile, the layer's own traced into it), and the
# layer compiled on its own gives the TensorFlow pixels.
_FIT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import keras
    from object_input.keras.layers import DeviceAugmentation

    directory = sys.argv[1]
    data = np.load(f"{directory}/inputs.npz")
    images, parameters = data["images"], data["parameters"]
    image_input = keras.Input(images.shape[1:], name="images")
    parameter_input = keras.Input(parameters.shape[1:], name="parameters")
    augment = [["random_horizontal_flip", {}], ["random_rotation", {"max_angle": 20.0}],
               ["random_gaussian_blur", {}], ["random_sharpness", {}],
               ["random_adjust_brightness", {}]]
    layer = DeviceAugmentation(augment)
    augmented = layer((image_input, parameter_input))
    pooled = keras.layers.GlobalAveragePooling2D()(keras.layers.Rescaling(1 / 255)(augmented))
    model = keras.Model([image_input, parameter_input], keras.layers.Dense(1)(pooled))
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    assert model.jit_compile
    history = model.fit([images, parameters], np.ones([len(images), 1]), batch_size=2, epochs=2,
                        verbose=0)
    assert np.all(np.isfinite(history.history["loss"])), history.history
    np.save(f"{directory}/predicted.npy", model.predict([images, parameters], verbose=0))
    pixels = layer((images, parameters), training=True)
    np.save(f"{directory}/pixels.npy", keras.ops.convert_to_numpy(pixels))
    if sys.argv[2] == "torch":
        import torch

        # The next batch of this shape reuses the compiled stage: nothing in it (a Keras
        # Operation's name counter, a TensorFlow call) may fail a guard on every call.
        torch._dynamo.config.error_on_recompile = True
        layer((images[::-1].copy(), parameters[::-1].copy()), training=True)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("keras_backend", ["jax", "torch"])
def test_a_model_with_the_layer_builds_and_fits(tmp_path, keras_backend):
    from object_input.keras.layers import DeviceAugmentation

    augment = [
        ("random_horizontal_flip", {}),
        ("random_rotation", {"max_angle": 20.0}),
        ("random_gaussian_blur", {}),
        ("random_sharpness", {}),
        ("random_adjust_brightness", {}),
    ]
    images, parameters = _batch(augment, salt=9)
    np.savez(tmp_path / "inputs.npz", images=images, parameters=parameters)
    _run(keras_backend, _FIT, tmp_path)
    predicted = np.load(tmp_path / "predicted.npy")
    assert predicted.shape == (BATCH, 1) and np.all(np.isfinite(predicted))
    expected = np.asarray(DeviceAugmentation(augment)((images, parameters), training=True))
    assert np.abs(expected - images).max() > 1.0
    assert np.abs(np.load(tmp_path / "pixels.npy") - expected).max() <= TOLERANCE


@pytest.mark.slow
def test_keras_ops_namespace_gives_the_tensorflow_pixels_in_process():
    # This process runs Keras on TensorFlow: the layer takes TensorFlow's own ops, and the
    # keras.ops namespace (what JAX and PyTorch run) is checked here against them, eagerly.
    assert backend.current() is backend.TENSORFLOW
    xp = backend.keras_ops()
    assert xp is backend.keras_ops() and xp.name == "tensorflow"
    for index, (name, params) in enumerate(CASES):
        images, parameters = _batch([(name, params)], salt=index)
        stage = DeviceStage.required([(name, params)], "test")
        expected = stage(tf.constant(images), tf.constant(parameters)).numpy()
        got = np.asarray(stage(tf.constant(images), tf.constant(parameters), xp=xp))
        difference = np.abs(got - expected).max()
        assert difference <= TOLERANCE, f"{name} {params}: max difference {difference}"


def test_colour_steps_on_other_backends_need_rgb_batches():
    stage = DeviceStage.required(["random_adjust_brightness"], "test")
    gray = tf.zeros([2, 4, 4, 1])
    with pytest.raises(ValueError, match="RGB batches only; this batch has 1 channels"):
        stage(gray, tf.zeros([2, 1]), xp=backend.keras_ops())
    assert stage(gray, tf.zeros([2, 1])).shape == (2, 4, 4, 1)


def test_other_namespaces_get_float32_and_compile_nothing_in_the_stage():
    # The per-step XLA functions are TensorFlow's: with another namespace the caller compiles.
    from object_input.ops import _device_stage as device_stage

    augment = [("random_horizontal_flip", {"probability": 0.987})]
    stage = DeviceStage.required(augment, "test")
    (form,) = [spec.device for _, spec, _ in stage.steps]
    images = tf.reshape(tf.range(2 * 2 * 3 * 3, dtype=tf.float32), [2, 2, 3, 3])
    xp = backend.keras_ops()
    with mock.patch.dict(device_stage._COMPILED, clear=True):
        flipped = np.asarray(stage(images, tf.ones([2, 1]), compiled=True, xp=xp))
        np.testing.assert_array_equal(flipped, images.numpy()[:, :, ::-1])
        assert not device_stage._COMPILED
        wanted = r"float32 through keras.ops \(backend 'tensorflow'\); it casts to uint8 only"
        with pytest.raises(ValueError, match=wanted):
            stage(images, tf.ones([2, 1]), dtype="uint8", xp=xp)
        assert stage(images, tf.ones([2, 1]), dtype="uint8", compiled=True).dtype == tf.uint8
        assert [key[0] for key in device_stage._COMPILED] == [form]


def test_noise_is_the_same_for_an_image_whatever_its_batch():
    from object_input.ops import _batched as device

    seeds = tf.constant([[3.0, 4.0], [5.0, 6.0]])
    both = device.uniform_noise(seeds, (4, 5, 3), 0, backend.TENSORFLOW).numpy()
    alone = device.uniform_noise(seeds[1:], (4, 5, 3), 0, backend.TENSORFLOW).numpy()
    np.testing.assert_array_equal(both[1], alone[0])
    assert not np.array_equal(both[0], both[1])
    other_stream = device.uniform_noise(seeds, (4, 5, 3), 1, backend.TENSORFLOW).numpy()
    assert not np.array_equal(both, other_stream)
    assert both.min() >= 0.0 and both.max() < 1.0
    assert abs(both.mean() - 0.5) < 0.06
