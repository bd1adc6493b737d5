"""The CIFAR-10 recipe through make_dataset on CIFAR-10 binaries written here."""

import numpy as np
import pytest

import object_input as oi
from object_input import fields, recipes
from object_input.sources import CIFAR10
from object_input.writers import write_cifar10
from object_input.writers.synthetic import write_synthetic_dataset


def _write_cifar10(path, n=6, seed=0):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, [n, 32, 32, 3], dtype=np.uint8)
    labels = rng.integers(0, 10, n)
    write_cifar10(path, images, labels)
    return images, labels


def test_evaluation_is_the_standardized_central_crop_exactly(tmp_path):
    images, labels = _write_cifar10(tmp_path / "test_batch.bin")
    dataset = oi.make_dataset(
        CIFAR10(tmp_path), augment=recipes.cifar10(train=False), batch_size=None, shuffle=False
    )
    for example, image, label in zip(dataset, images, labels, strict=True):
        crop = image[4:28, 4:28].astype(np.float64)
        expected = (crop - crop.mean()) / max(crop.std(), 1 / np.sqrt(crop.size))
        np.testing.assert_allclose(example[fields.IMAGE].numpy(), expected, atol=1e-5)
        assert int(example[fields.LABEL]) == label


def test_training_gives_standardized_24x24_crops_reproducibly(tmp_path):
    _write_cifar10(tmp_path / "data_batch_1.bin")

    def run():
        return list(
            oi.make_dataset(CIFAR10(tmp_path), augment=recipes.cifar10(), batch_size=3, seed=7)
        )

    first, again = run(), run()
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a[fields.IMAGE].numpy(), b[fields.IMAGE].numpy())
    batch = first[0][fields.IMAGE].numpy()
    assert batch.shape == (3, 24, 24, 3) and batch.dtype == np.float32
    np.testing.assert_allclose(batch.mean(axis=(1, 2, 3)), 0.0, atol=1e-4)
    np.testing.assert_allclose(batch.std(axis=(1, 2, 3)), 1.0, atol=1e-3)
    centre = oi.make_dataset(
        CIFAR10(tmp_path), augment=recipes.cifar10(train=False), batch_size=3, shuffle=False
    )
    assert not np.allclose(
        np.sort(batch.ravel()), np.sort(next(iter(centre))[fields.IMAGE].numpy().ravel())
    )


def test_recipe_steps():
    assert [name for name, _ in recipes.cifar10()] == [
        "random_crop_to_size",
        "random_horizontal_flip",
        "random_adjust_brightness",
        "random_adjust_contrast",
        "per_image_standardization",
    ]
    brightness = dict(recipes.cifar10())["random_adjust_brightness"]["max_delta"]
    assert brightness * 255 == pytest.approx(63)


def test_yolo_recipe_holds_the_yolo_defaults():
    steps = recipes.yolo(320)
    assert [name for name, _ in steps] == [
        "mosaic",
        "random_affine",
        "random_horizontal_flip",
        "random_adjust_hue",
        "random_adjust_saturation",
        "random_adjust_brightness",
    ]
    params = dict(steps)
    assert params["mosaic"]["output_size"] == (320, 320)
    assert params["random_horizontal_flip"] == {"probability": 0.5}
    assert params["random_affine"]["scale_range"] == (0.5, 1.5)
    assert params["random_affine"]["max_translation"] == 0.1
    assert params["random_adjust_hue"] == {"max_delta": 0.015}
    assert params["random_adjust_saturation"] == {"min_delta": pytest.approx(0.3), "max_delta": 1.7}
    mixed = dict(recipes.yolo(320, mixup=0.1))
    assert mixed["mixup"] == {"alpha": 32.0, "probability": 0.1}
    oi.ops.Augmentation(recipes.yolo(320, mixup=0.1, degrees=10.0))  # resolves in the registry
    with pytest.raises(oi.ops.ConfigError, match="scale_range"):
        oi.ops.Augmentation(recipes.yolo(scale=1.5))


@pytest.mark.parametrize("mixup", [0.0, pytest.param(1.0, marks=pytest.mark.slow)])
def test_yolo_recipe_runs_in_make_dataset(tmp_path, mixup):
    files = write_synthetic_dataset(tmp_path, 6, 1, sizes=((40, 56), (48, 32)), min_objects=1)
    dataset = oi.make_dataset(
        files,
        augment=recipes.yolo(32, degrees=10.0, mixup=mixup),
        image_size=(32, 32),
        batch_size=3,
        seed=1,
        shuffle=False,
    )
    count = 0
    for batch in dataset:
        images, boxes = batch[fields.IMAGE].numpy(), batch[fields.BOXES].numpy()
        assert images.shape[1:] == (32, 32, 3) and images.dtype == np.float32
        assert ((boxes >= 0) & (boxes <= 1)).all()
        count += len(images)
    assert count == 6
