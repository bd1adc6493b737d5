"""make_dataset(keras="detection") feeds KerasHub detectors and Keras layers directly."""

import numpy as np
import pytest

import object_input as oi
from object_input import fields

keras_hub = pytest.importorskip("keras_hub", reason="pip install '.[test]' brings keras-hub")
IMAGE_SIZE = (128, 128)


def small_retinanet(num_classes: int):
    """A RetinaNet on a small ResNet built from arguments: no pretrained weights, no download."""
    encoder = keras_hub.models.ResNetBackbone(
        input_conv_filters=[64],
        input_conv_kernel_sizes=[3],
        stackwise_num_filters=[64, 16, 16, 16],
        stackwise_num_blocks=[1, 1, 1, 1],
        stackwise_num_strides=[1, 2, 2, 2],
        block_type="basic_block",
        image_shape=(*IMAGE_SIZE, 3),
    )
    backbone = keras_hub.models.RetinaNetBackbone(
        image_encoder=encoder, min_level=3, max_level=5, use_p5=False, image_shape=(*IMAGE_SIZE, 3)
    )
    return keras_hub.models.RetinaNetObjectDetector(
        backbone=backbone,
        num_classes=num_classes,
        bounding_box_format="xyxy",
        pre_logits_num_conv_layers=1,
    )


@pytest.fixture(scope="module")
def detector():
    """One RetinaNet (3 classes) for every source: tracing its train step is most of a fit's
    time, and every source's batches have the same spec."""
    model = small_retinanet(num_classes=3)
    model.compile(optimizer="adam")
    return model


def sparse_tfrecords(folder) -> str:
    """Detection records whose 3 classes have COCO-like ids with gaps (1, 3, 90), and the
    label_map.pbtxt a converter writes beside them."""
    from object_input.label_map import write_label_map
    from object_input.writers import build_example, write_tfrecords

    rng = np.random.default_rng(0)
    records = [
        build_example(
            rng.integers(0, 256, (96, 128, 3), dtype=np.uint8),
            boxes=[[0.1, 0.1, 0.6, 0.5], [0.4, 0.5, 0.9, 0.95]],
            classes=classes,
        )
        for classes in ([90, 1], [3, 90], [1, 3], [90, 90])
    ]
    write_label_map(folder / "label_map.pbtxt", {"person": 1, "car": 3, "toothbrush": 90})
    return write_tfrecords(records, str(folder / "train"))[0]


@pytest.fixture(params=["tfrecord", "tfrecord_sparse_ids", "tfds", "huggingface"])
def detection_source(request, tmp_path):
    """Detection data with 3 classes as make_dataset takes it from each kind of source, and
    the make_dataset options it needs."""
    if request.param == "tfrecord":
        from object_input.writers.synthetic import CLASS_NAMES

        label_map = {name: i for i, name in enumerate(CLASS_NAMES, start=1)}
        return str(request.getfixturevalue("synthetic_dir")), {"label_map": label_map}
    if request.param == "tfrecord_sparse_ids":
        return sparse_tfrecords(tmp_path), {}
    if request.param == "tfds":
        from tfds_builders import TinyDetection, prepare  # skips without tensorflow-datasets

        builder = prepare(TinyDetection(config="png", data_dir=tmp_path))
        return oi.sources.TFDS(builder, split="train"), {}
    from hf_datasets import detection_dataset  # skips without datasets

    return detection_dataset(), {}  # a datasets.Dataset, passed as it is


@pytest.mark.slow
def test_retinanet_fits_on_make_dataset_output(detection_source, detector):
    source, options = detection_source
    train = oi.make_dataset(
        source,
        batch_size=2,
        image_size=IMAGE_SIZE,
        max_boxes=6,
        batching="static",
        num_epochs=None,
        seed=1,
        output_dtype="float32",
        augment=["random_horizontal_flip"],
        keras="detection",
        bounding_box_format="xyxy",
        **options,
    )
    # The model's num_classes comes from the data; every label the model sees is below it.
    assert len(train.class_names) == 3
    for _, targets in train.take(4):
        labels = targets["labels"].numpy()
        assert labels.max() < 3 and set(labels[labels < 0]) <= {-1}
    images_spec, targets_spec = train.element_spec
    assert images_spec.shape == (2, *IMAGE_SIZE, 3)
    assert targets_spec["boxes"].shape == (2, 6, 4)
    assert targets_spec["labels"].shape == (2, 6)
    history = detector.fit(train, epochs=1, steps_per_epoch=2, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 1 and np.isfinite(losses[0]) and losses[0] > 0


def test_detection_targets_match_the_feature_batches(synthetic_dir):
    options = dict(
        batch_size=4, image_size=(64, 96), max_boxes=6, batching="static", seed=3, shuffle=False
    )
    batch = next(iter(oi.make_dataset(str(synthetic_dir), **options)))
    images, targets = next(
        iter(
            oi.make_dataset(
                str(synthetic_dir), keras="detection", bounding_box_format="center_yxhw", **options
            )
        )
    )
    np.testing.assert_array_equal(images.numpy(), batch[fields.IMAGE].numpy())
    valid = np.arange(6)[None, :] < batch[fields.NUM_BOXES].numpy()[:, None]
    expected = oi.box_formats.convert(
        batch[fields.BOXES], "rel_yxyx", "center_yxhw", (64, 96)
    ).numpy()
    np.testing.assert_allclose(targets["boxes"].numpy()[valid], expected[valid], rtol=1e-6)
    np.testing.assert_array_equal(
        targets["labels"].numpy(), np.where(valid, batch[fields.CLASSES].numpy() - 1, -1)
    )
    assert (targets["boxes"].numpy()[~valid] == 0).all()


@pytest.mark.slow
def test_keras_layers_in_make_dataset_are_reproducible_whatever_the_parallelism(synthetic_dir):
    import keras

    def first_batches(parallel, layer_seed):
        layers = [
            keras.layers.RandomFlip("horizontal", bounding_box_format="xyxy", seed=layer_seed),
            keras.layers.RandomTranslation(0.2, 0.2, bounding_box_format="xyxy", seed=layer_seed),
        ]
        dataset = oi.make_dataset(
            str(synthetic_dir),
            batch_size=4,
            seed=11,
            masks="png",
            num_parallel_calls=parallel,
            augment=[("keras_layer", {"layer": layer}) for layer in layers],
        )
        return [b[fields.BOXES].numpy() for b in dataset.take(3)]

    # The example seeds decide, not the layers' own generators nor the thread order.
    one, four = first_batches(1, layer_seed=5), first_batches(4, layer_seed=99)
    for a, b in zip(one, four, strict=True):
        np.testing.assert_array_equal(a, b)
