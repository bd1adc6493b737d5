"""Pipeline configs: pipeline.config (protobuf text), YAML, mappings and step lists."""

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from object_input import fields
from object_input.config.pipeline_config import (
    PipelineConfig,
    load_pipeline_config,
    parse_augmentation,
)
from object_input.label_map import LabelMapError
from object_input.ops import Augmentation, ConfigError, registered_steps
from object_input.options import ReadOptions
from object_input.pipeline import DatasetOptions, make_dataset

DATA = Path(__file__).parents[1] / "data"


def requires_steps(*names):
    """Fail, naming them, when a step in ``names`` is not registered.

    A renamed or removed step must break the config tests that use it, not skip them.
    """
    missing = [n for n in names if n not in registered_steps()]
    assert not missing, f"augmentation steps not registered: {', '.join(missing)}"


def write(tmp_path, text, name="pipeline.config"):
    path = tmp_path / name
    path.write_text(text)
    return path


def load_text(tmp_path, text, name="pipeline.config"):
    return load_pipeline_config(write(tmp_path, text, name))


def train(*blocks, batch_size=None):
    """A pipeline.config whose train_config holds the given augmentation blocks."""
    lines = ["train_config {"]
    if batch_size is not None:
        lines.append(f"  batch_size: {batch_size}")
    lines += [f"  data_augmentation_options {{ {b} }}" for b in blocks]
    return "\n".join([*lines, "}", ""])


def _example(height=40, width=60):
    return {
        fields.IMAGE: tf.constant(
            np.arange(height * width * 3).reshape(height, width, 3) % 256, tf.uint8
        ),
        fields.BOXES: tf.constant([[0.1, 0.1, 0.5, 0.6], [0.4, 0.3, 0.9, 0.9]], tf.float32),
        fields.CLASSES: tf.constant([1, 2], tf.int32),
        fields.IMAGE_SHAPE: tf.constant([height, width], tf.int32),
    }


# --- the reference pipeline.config -----------------------------------------------------------


def test_reference_config_loads():
    requires_steps("random_horizontal_flip", "ssd_random_crop", "random_absolute_pad_image")
    config = load_pipeline_config(DATA / "ssd_example.config")
    assert config == PipelineConfig(
        input_paths=[str(DATA / "train-?????-of-00010.tfrecord")],
        label_map_path=str(DATA / "label_map.pbtxt"),
        augment=[
            {"random_horizontal_flip": {}},
            {
                "ssd_random_crop": {
                    "operations": [
                        {
                            "min_object_covered": 0.0,
                            "min_aspect_ratio": 0.5,
                            "max_aspect_ratio": 2.0,
                            "min_area": 0.1,
                            "max_area": 1.0,
                            "overlap_thresh": 0.0,
                            "random_coef": 0.15,
                        }
                    ]
                }
            },
            {
                "random_absolute_pad_image": {
                    "max_height_padding": 200,
                    "max_width_padding": 200,
                    "pad_color": [0, 0, 0],
                }
            },
        ],
        batch_size=64,
        max_boxes=100,
    )
    # Settings the file leaves out take make_dataset's defaults: one declaration for every entry
    # point (shuffle None: the source's default, on for training files).
    assert (config.shuffle, config.shuffle_buffer_size, config.num_readers) == (None, 2048, 8)
    assert (config.read_block_length, config.num_epochs, config.drop_remainder) == (1, 1, None)


def test_reference_config_dataset_kwargs():
    requires_steps("random_horizontal_flip", "ssd_random_crop", "random_absolute_pad_image")
    kwargs = load_pipeline_config(str(DATA / "ssd_example.config")).to_dataset_kwargs()
    # Only what the file sets explicitly, differing from make_dataset's defaults.
    assert set(kwargs) == {"source", "label_map", "augment", "batch_size", "max_boxes"}
    assert set(kwargs) <= {f.name for f in dataclasses.fields(DatasetOptions)}
    assert kwargs["source"] == [str(DATA / "train-?????-of-00010.tfrecord")]
    assert kwargs["label_map"] == {"cat": 1, "dog": 2, "person": 3}
    assert kwargs["batch_size"] == 64 and kwargs["max_boxes"] == 100
    assert [next(iter(step)) for step in kwargs["augment"]] == [
        "random_horizontal_flip",
        "ssd_random_crop",
        "random_absolute_pad_image",
    ]


def test_reference_augmentation_runs():
    requires_steps("random_horizontal_flip", "ssd_random_crop", "random_absolute_pad_image")
    augment = parse_augmentation(DATA / "ssd_example.config")
    assert isinstance(augment, Augmentation) and len(augment) == 3
    # Eager: graph mode is covered by the op tests and by make_dataset below.
    out = augment(_example(), seed=[3, 4])
    height, width = out[fields.IMAGE_SHAPE].numpy()
    assert out[fields.IMAGE].shape[:2] == (height, width)
    # The pad adds at most 199 pixels to whatever the crop left.
    assert 1 <= height <= 40 + 199 and 1 <= width <= 60 + 199
    boxes = out[fields.BOXES].numpy()
    assert boxes.shape[0] == out[fields.CLASSES].shape[0]
    assert np.all((boxes >= 0) & (boxes <= 1))


# --- step messages → parameters --------------------------------------------------------------


def test_flip_rotation_and_resize_messages(tmp_path):
    config = load_text(
        tmp_path,
        train(
            "random_horizontal_flip { keypoint_flip_permutation: 1 "
            "keypoint_flip_permutation: 0 probability: 0.25 }",
            "random_vertical_flip { keypoint_flip_permutation: [0, 1] }",
            "random_rotation90 { }",
            "resize_image { new_height: 32 new_width: 48 method: NEAREST_NEIGHBOR }",
            batch_size=4,
        ),
    )
    assert config.batch_size == 4
    assert config.augment == [
        {"random_horizontal_flip": {"keypoint_flip_permutation": [1, 0], "probability": 0.25}},
        {"random_vertical_flip": {"keypoint_flip_permutation": [0, 1]}},
        {"random_rotation90": {}},
        {"resize_image": {"new_height": 32, "new_width": 48, "method": "NEAREST_NEIGHBOR"}},
    ]
    # Enum values become plain strings.
    assert type(config.augment[3]["resize_image"]["method"]) is str
    out = config.augmentation()(_example(), seed=1)
    assert out[fields.IMAGE].shape == (32, 48, 3)


def test_random_crop_image_ranges(tmp_path):
    requires_steps("random_crop_image")
    config = load_text(
        tmp_path,
        train(
            "random_crop_image { min_object_covered: 0.5 min_aspect_ratio: 0.5 "
            "max_aspect_ratio: 2.0 min_area: 0.2 max_area: 0.9 overlap_thresh: 0.4 "
            "clip_boxes: false random_coef: 0.1 }",
            # Half a range: the other half is the step's default, as with the protobuf default.
            "random_crop_image { min_area: 0.3 }",
            "random_crop_image { }",
        ),
    )
    assert config.augment == [
        {
            "random_crop_image": {
                "min_object_covered": 0.5,
                "aspect_ratio_range": (0.5, 2.0),
                "area_range": (0.2, 0.9),
                "overlap_thresh": 0.4,
                "clip_boxes": False,
                "random_coef": 0.1,
            }
        },
        {"random_crop_image": {"area_range": (0.3, 1.0)}},
        {"random_crop_image": {}},
    ]


def test_random_crop_pad_image_message(tmp_path):
    requires_steps("random_crop_pad_image")
    config = load_text(
        tmp_path,
        train(
            "random_crop_pad_image { min_aspect_ratio: 0.8 max_area: 0.7 "
            "min_padded_size_ratio: [1.0, 1.2] max_padded_size_ratio: 1.5 "
            "max_padded_size_ratio: 1.8 pad_color: [1, 2, 3] }"
        ),
    )
    assert config.augment == [
        {
            "random_crop_pad_image": {
                "aspect_ratio_range": (0.8, 1.33),
                "area_range": (0.1, 0.7),
                "min_padded_size_ratio": [1.0, 1.2],
                "max_padded_size_ratio": [1.5, 1.8],
                "pad_color": [1, 2, 3],
            }
        }
    ]


def test_random_pad_image_sizes(tmp_path):
    requires_steps("random_pad_image")
    config = load_text(
        tmp_path,
        train(
            "random_pad_image { min_image_height: 50 min_image_width: 70 max_image_height: 80 "
            "max_image_width: 90 pad_color: [0.5, 0.5, 0.5] }"
        ),
    )
    assert config.augment == [
        {
            "random_pad_image": {
                "min_image_size": (50, 70),
                "max_image_size": (80, 90),
                "pad_color": [0.5, 0.5, 0.5],
            }
        }
    ]
    with pytest.raises(ConfigError, match=r"pipeline\.config:2:68: min_image_height needs min_"):
        load_text(tmp_path, train("random_pad_image { min_image_height: 50 }"))


def test_label_steps(tmp_path):
    requires_steps("drop_label_probabilistically", "remap_labels")
    config = load_text(
        tmp_path,
        train(
            "drop_label_probabilistically { label: 2 drop_probability: 0.5 }",
            "remap_labels { original_labels: 3 original_labels: 4 new_label: 1 }",
        ),
    )
    assert config.augment == [
        {"drop_label_probabilistically": {"dropped_label": 2, "drop_probability": 0.5}},
        {"remap_labels": {"original_labels": [3, 4], "new_label": 1}},
    ]
    with pytest.raises(ConfigError, match="unknown field 'dropped_label' in step"):
        load_text(tmp_path, train("drop_label_probabilistically { dropped_label: 2 }"))


def test_jitter_mode_enum(tmp_path):
    requires_steps("random_jitter_boxes")
    config = load_text(
        tmp_path, train("random_jitter_boxes { ratio: 0.1 jitter_mode: EXPAND_SYMMETRIC }")
    )
    assert config.augment == [
        {"random_jitter_boxes": {"ratio": 0.1, "jitter_mode": "EXPAND_SYMMETRIC"}}
    ]


def test_ssd_operations(tmp_path):
    requires_steps("ssd_random_crop_pad", "ssd_random_crop_pad_fixed_aspect_ratio")
    config = load_text(
        tmp_path,
        train(
            "ssd_random_crop_pad { operations { min_object_covered: 0.1 min_area: 0.2 "
            "max_area: 1.0 min_padded_size_ratio: [1.0, 1.0] max_padded_size_ratio: [2.0, 2.0] "
            "pad_color_r: 0.5 pad_color_g: 0.4 pad_color_b: 0.3 } "
            "operations { min_object_covered: 0.9 clip_boxes: false } }",
            "ssd_random_crop_pad_fixed_aspect_ratio { aspect_ratio: 1.5 "
            "min_padded_size_ratio: [1.0, 1.0] max_padded_size_ratio: [1.5, 1.5] "
            "operations { min_object_covered: 0.3 } }",
        ),
    )
    assert config.augment == [
        {
            "ssd_random_crop_pad": {
                "operations": [
                    {
                        "min_object_covered": 0.1,
                        "min_area": 0.2,
                        "max_area": 1.0,
                        "min_padded_size_ratio": [1.0, 1.0],
                        "max_padded_size_ratio": [2.0, 2.0],
                        "pad_color_r": 0.5,
                        "pad_color_g": 0.4,
                        "pad_color_b": 0.3,
                    },
                    {"min_object_covered": 0.9, "clip_boxes": False},
                ]
            }
        },
        {
            "ssd_random_crop_pad_fixed_aspect_ratio": {
                "aspect_ratio": 1.5,
                "min_padded_size_ratio": [1.0, 1.0],
                "max_padded_size_ratio": [1.5, 1.5],
                "operations": [{"min_object_covered": 0.3}],
            }
        },
    ]
    # An empty ssd_random_crop block keeps the step's default operations.
    requires_steps("ssd_random_crop")
    assert load_text(tmp_path, train("ssd_random_crop { }")).augment == [{"ssd_random_crop": {}}]


# --- pipeline.config errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("blocks", "pattern"),
    [
        (
            ["random_horizontal_flip { }", "random_horizontl_flip { }"],
            r"pipeline\.config:3:31: data_augmentation_options block #2: unknown augmentation "
            r"step 'random_horizontl_flip'; did you mean 'random_horizontal_flip'",
        ),
        (
            ["random_horizontal_flip { } random_vertical_flip { }"],
            r"pipeline\.config:2:29: data_augmentation_options block #1 must hold exactly one "
            r"step, found 2 \(random_horizontal_flip, random_vertical_flip\)",
        ),
        (
            ["random_horizontal_flip { } random_horizontal_flip { }"],
            r"block #1 must hold exactly one step, found 2",
        ),
        ([""], r":2:29: data_augmentation_options block #1 must hold exactly one step, found 0"),
        (
            ["random_horizontal_flip { probabilty: 0.2 }"],
            r":2:68: unknown field 'probabilty' in step 'random_horizontal_flip'; "
            r"did you mean 'probability'",
        ),
        (
            ["random_horizontal_flip { probability: 1.5 }"],
            r"pipeline\.config:2:31: data_augmentation_options block #1: step "
            r"'random_horizontal_flip': parameter 'probability' must be in \[0\.0, 1\.0\], "
            r"got 1\.5",
        ),
        (
            ["resize_image { new_height: 10.5 }"],
            r"block #1: step 'resize_image': parameter 'new_height' must be an integer",
        ),
        (
            ["resize_image { method: LANCZOS }"],
            r"block #1: step 'resize_image': parameter 'method' must be one of",
        ),
        (
            ["random_horizontal_flip { probability: 0.5 probability: 0.2 }"],
            r":2:86: field 'probability' is set 2 times",
        ),
        (["random_horizontal_flip: 1"], r":2:55: .*'random_horizontal_flip' must be a message"),
        (
            ["resize_image { new_height { } }"],
            r"parameter 'new_height' must be an integer, got \{\}",
        ),
    ],
)
def test_augmentation_errors(tmp_path, blocks, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_text(tmp_path, train(*blocks))


def test_two_range_step_errors(tmp_path):
    requires_steps("random_crop_image")
    with pytest.raises(ConfigError, match=r"parameter 'area_range' must be \(low, high\)"):
        load_text(tmp_path, train("random_crop_image { min_area: 0.9 max_area: 0.2 }"))
    with pytest.raises(ConfigError, match="unknown field 'aspect_ratio_range' in step"):
        load_text(tmp_path, train("random_crop_image { aspect_ratio_range: [1, 2] }"))


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("train_config { batch_size: 0 }", r"pipeline\.config:1:28: batch_size must be >= 1"),
        ("train_config { batch_size: 2.5 }", r":1:28: field 'batch_size' must be an integer"),
        (
            "train_config { batch_sise: 8 }",
            r":1:28: unknown field 'batch_sise' in train_config; did you mean 'batch_size'",
        ),
        (
            "train_config { data_augmentation_option { random_horizontal_flip { } } }",
            r"did you mean 'data_augmentation_options'",
        ),
        (
            "train_config { merge_multiple_label_boxes: true }",
            r"train_config\.merge_multiple_label_boxes: True is not supported",
        ),
        ("eval_config { }", r"pipeline\.config: no train_config or train_input_reader block"),
        ("trian_config { }", r":1:1: unknown field 'trian_config' in a pipeline config"),
        ("train_config { } train_config { }", r":1:18: field 'train_config' is set 2 times"),
        ("train_config { batch_size: 8 ", r"pipeline\.config:1:30: expected '}'"),
        (
            "train_input_reader { shuffle_bufer_size: 10 }",
            r":1:42: unknown field 'shuffle_bufer_size' in train_input_reader; did you mean",
        ),
        (
            "train_input_reader { sample_1_of_n_examples: 10 }",
            r"train_input_reader\.sample_1_of_n_examples: 10 is not supported",
        ),
        (
            "train_input_reader { input_type: TF_SEQUENCE_EXAMPLE }",
            r"input_type: 'TF_SEQUENCE_EXAMPLE' is not supported",
        ),
        (
            "train_input_reader { external_input_reader { } }",
            r"external_input_reader is not supported",
        ),
        (
            "train_input_reader { max_number_of_boxes: 0 }",
            r":1:43: max_number_of_boxes must be >= 1",
        ),
        (
            "train_input_reader { load_instance_masks: true mask_type: RLE }",
            r":1:59: mask_type must be one of DEFAULT, NUMERICAL_MASKS, PNG_MASKS, got 'RLE'",
        ),
        (
            "train_input_reader { tf_record_input_reader { input_paths: 'a' } }",
            r"unknown field 'input_paths' in tf_record_input_reader; did you mean 'input_path'",
        ),
        (
            "train_input_reader { label_map_path: 3 }",
            r"field 'label_map_path' must be a quoted string",
        ),
    ],
)
def test_pipeline_config_errors(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_text(tmp_path, text)


def test_missing_file():
    with pytest.raises(ConfigError, match=r"cannot read config '/nonexistent/p\.config'"):
        load_pipeline_config("/nonexistent/p.config")


# --- train_input_reader → settings -----------------------------------------------------------


def test_input_reader_settings(tmp_path):
    config = load_text(
        tmp_path,
        """
        model { ssd { num_classes: 3 } }
        train_config { batch_size: 8 optimizer { adam_optimizer { } } num_steps: 1000 }
        train_input_reader {
          label_map_path: "maps/labels.pbtxt"
          tf_record_input_reader {
            input_path: "data/a-*.tfrecord"
            input_path: "/abs/b.tfrecord"
            input_path: "gs://bucket/c.tfrecord"
          }
          shuffle: false
          shuffle_buffer_size: 100
          filenames_shuffle_buffer_size: 10
          num_epochs: 3
          num_readers: 4
          read_block_length: 2
          max_number_of_boxes: 50
          load_instance_masks: true
          mask_type: PNG_MASKS
          num_keypoints: 17
          use_display_name: true
          load_multiclass_scores: true
          num_parallel_batches: 2
          sample_1_of_n_examples: 1
          input_type: TF_EXAMPLE
        }
        eval_config { num_examples: 10 }
        eval_input_reader { shuffle: false }
        """,
    )
    assert config == PipelineConfig(
        input_paths=[
            str(tmp_path / "data/a-*.tfrecord"),
            "/abs/b.tfrecord",
            "gs://bucket/c.tfrecord",
        ],
        label_map_path=str(tmp_path / "maps/labels.pbtxt"),
        use_display_name=True,
        batch_size=8,
        max_boxes=50,
        shuffle=False,
        shuffle_buffer_size=100,
        file_shuffle=False,
        num_readers=4,
        read_block_length=2,
        num_epochs=3,
        masks="png",
        num_keypoints=17,
        multiclass_scores=True,
    )


@pytest.mark.parametrize(
    ("reader", "expected"),
    [
        ("num_epochs: 0", {"num_epochs": None}),
        ("load_instance_masks: true", {"masks": "numerical"}),
        ("load_instance_masks: true mask_type: NUMERICAL_MASKS", {"masks": "numerical"}),
        ("load_instance_masks: false mask_type: PNG_MASKS", {"masks": None}),
        ("shuffle: true", {"shuffle": True, "file_shuffle": True}),
    ],
)
def test_input_reader_values(tmp_path, reader, expected):
    config = load_text(tmp_path, f"train_input_reader {{ {reader} }}")
    assert {k: getattr(config, k) for k in expected} == expected


def test_use_display_name_reaches_the_label_map(tmp_path):
    (tmp_path / "map.pbtxt").write_text((DATA / "label_map.pbtxt").read_text())
    config = load_text(
        tmp_path, 'train_input_reader { label_map_path: "map.pbtxt" use_display_name: true }'
    )
    assert config.to_dataset_kwargs()["label_map"] == {"Cat": 1, "Dog": 2, "person": 3}


def test_a_missing_or_bad_label_map_names_the_config_file_and_line(tmp_path):
    missing = load_text(tmp_path, 'train_input_reader {\n  label_map_path: "maps/nope.pbtxt"\n}\n')
    with pytest.raises(LabelMapError) as raised:
        missing.to_dataset_kwargs()
    nope = tmp_path / "maps" / "nope.pbtxt"
    assert str(raised.value) == (
        f"{tmp_path / 'pipeline.config'}:2:19: label_map_path: cannot read label map "
        f"{str(nope)!r}: [Errno 2] No such file or directory: {str(nope)!r}"
    )
    (tmp_path / "bad.pbtxt").write_text("item { id: 1 }")
    yaml_config = write(tmp_path, "batch_size: 2\nlabel_map_path: bad.pbtxt\n", "c.yaml")
    with pytest.raises(LabelMapError) as raised:
        load_pipeline_config(yaml_config).to_dataset_kwargs()
    assert str(raised.value).startswith(
        f"{yaml_config}:2:17: label_map_path: {tmp_path / 'bad.pbtxt'}:1:1: item with id 1 has no"
    )
    # Set in Python, the label map's own error is the whole message.
    with pytest.raises(LabelMapError, match=r"^cannot read label map 'nope\.pbtxt'"):
        PipelineConfig(label_map_path="nope.pbtxt").to_dataset_kwargs()


# --- YAML --------------------------------------------------------------------------------------


def test_yaml_config(tmp_path):
    path = write(
        tmp_path,
        """
        input_paths: records/train-*.tfrecord
        label_map_path: label_map.pbtxt
        batch_size: 8
        seed: 42
        num_epochs: 0
        masks: png
        augment:
          - random_horizontal_flip
          - random_vertical_flip: {probability: 1.0e-1}
          - random_rotation90: null
          - resize_image: {new_height: 64, new_width: 64, method: area}
        """.replace("\n        ", "\n"),
        name="config.yaml",
    )
    config = load_pipeline_config(path)
    assert config == PipelineConfig(
        input_paths=[str(tmp_path / "records/train-*.tfrecord")],
        label_map_path=str(tmp_path / "label_map.pbtxt"),
        batch_size=8,
        seed=42,
        masks="png",
        num_epochs=None,
        augment=[
            {"random_horizontal_flip": {}},
            {"random_vertical_flip": {"probability": 0.1}},
            {"random_rotation90": {}},
            {"resize_image": {"new_height": 64, "new_width": 64, "method": "area"}},
        ],
    )
    assert config.num_epochs is None
    out = config.augmentation()(_example(), seed=5)
    assert out[fields.IMAGE].shape == (64, 64, 3)


def test_yaml_scientific_notation_is_a_float(tmp_path):
    path = write(
        tmp_path,
        "augment:\n  - random_horizontal_flip: {probability: 5e-1}\n",
        name="c.yml",
    )
    step = load_pipeline_config(path).augment[0]["random_horizontal_flip"]
    assert step["probability"] == 0.5 and isinstance(step["probability"], float)


def test_yaml_list_is_an_augmentation(tmp_path):
    path = write(
        tmp_path,
        "- random_horizontal_flip\n- random_rotation90: {probability: 1}\n",
        name="steps.yaml",
    )
    config = load_pipeline_config(path)
    assert config.augment == [
        {"random_horizontal_flip": {}},
        {"random_rotation90": {"probability": 1}},
    ]
    assert config.batch_size == 32


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("batch_sise: 8\n", r"c\.yaml: unknown setting 'batch_sise'; did you mean 'batch_size'"),
        ("batch_size: '8'\n", r"c\.yaml: batch_size must be an integer or None, got '8'"),
        ("shuffle: 1\n", r"c\.yaml: shuffle must be true or false or None, got 1"),
        ("masks: rle\n", r"c\.yaml: masks must be one of \('png', 'numerical'\) or None"),
        ("input_paths: {a: 1}\n", r"c\.yaml: input_paths must be a path or a list of paths"),
        (
            "augment:\n  - random_horizontal_flip\n  - random_rotation90: {probability: 2}\n",
            r"c\.yaml: augment step #2: step 'random_rotation90': parameter 'probability' must be",
        ),
        (
            "augment:\n  - {random_horizontal_flip: {}, random_vertical_flip: {}}\n",
            r"c\.yaml: augmentation step #1: one block must hold exactly one step, found 2",
        ),
        ("augment:\n  - random_flip\n", r"augment step #1: unknown augmentation step"),
        ("augment: random_horizontal_flip\n", r"augment must be a list of steps"),
        ("batch_size: [1\n", r"c\.yaml: invalid YAML"),
        ("42\n", r"c\.yaml: expected a mapping of settings or a list of steps"),
    ],
)
def test_yaml_errors(tmp_path, text, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_pipeline_config(write(tmp_path, text, name="c.yaml"))


def test_empty_yaml_gives_defaults(tmp_path):
    assert load_pipeline_config(write(tmp_path, "", name="c.yaml")) == PipelineConfig()


# --- Python objects --------------------------------------------------------------------------


def test_list_of_steps():
    config = load_pipeline_config(
        ["random_horizontal_flip", ("random_vertical_flip", {"probability": 1.0})]
    )
    assert config.augment == [
        {"random_horizontal_flip": {}},
        {"random_vertical_flip": {"probability": 1.0}},
    ]
    assert config.input_paths == [] and "source" not in config.to_dataset_kwargs()
    with pytest.raises(ConfigError, match=r"augment step #2: unknown augmentation step 'nope'"):
        load_pipeline_config(["random_horizontal_flip", "nope"])


def test_mapping_paths_are_not_rebased():
    config = load_pipeline_config({"input_paths": ["a/*.tfrecord"], "label_map_path": "m.pbtxt"})
    assert config.input_paths == ["a/*.tfrecord"] and config.label_map_path == "m.pbtxt"
    with pytest.raises(ConfigError, match=r"^config: unknown setting 'paths'"):
        load_pipeline_config({"paths": "x"})


def test_parse_augmentation():
    augment = parse_augmentation([{"random_vertical_flip": {"probability": 1.0}}])
    out = augment(_example(), seed=0)
    np.testing.assert_allclose(
        out[fields.BOXES].numpy(), [[0.5, 0.1, 0.9, 0.6], [0.1, 0.3, 0.6, 0.9]], atol=1e-6
    )
    config = PipelineConfig(augment=["random_rotation90"])
    assert parse_augmentation(config).as_config() == [
        {"random_rotation90": {"keypoint_rot_permutation": None, "probability": 0.5}}
    ]
    with pytest.raises(ConfigError, match="must be a list of steps"):
        parse_augmentation({"random_rotation90": {}})


def test_wrong_source_type():
    with pytest.raises(TypeError, match="file path, a mapping or a list of steps"):
        load_pipeline_config(3)


# --- PipelineConfig itself -------------------------------------------------------------------


def test_defaults_and_normalisation():
    config = PipelineConfig(input_paths=Path("x.tfrecord"), num_epochs=0)
    assert config.input_paths == ["x.tfrecord"] and config.num_epochs is None
    assert config.to_dataset_kwargs() == {"source": ["x.tfrecord"], "num_epochs": None}
    tuned = PipelineConfig(num_readers=64, read_block_length=32, multiclass_scores=True)
    assert tuned.to_dataset_kwargs() == {
        "reading": {"num_readers": 64, "block_length": 32},
        "decoding": {"multiclass_scores": True},
    }


@pytest.mark.slow
def test_config_values_win_over_defaults_and_keywords_over_both(synthetic_dir):
    config = PipelineConfig(input_paths=[synthetic_dir], batch_size=5, drop_remainder=True)
    batches = list(make_dataset(config=config, num_epochs=1, shuffle=False))
    assert [len(b["image"]) for b in batches] == [5, 5, 5, 5]
    batches = list(make_dataset(config=config, batch_size=10, shuffle=False))
    assert [len(b["image"]) for b in batches] == [10, 10]
    # A keyword equal to make_dataset's default still wins over the config.
    batches = list(make_dataset(config=config, drop_remainder=False, shuffle=False))
    assert [len(b["image"]) for b in batches] == [5, 5, 5, 5, 4]


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({"batch_size": 0}, r"batch_size must be >= 1, got 0"),
        ({"batch_size": True}, r"batch_size must be an integer or None, got True"),
        ({"max_boxes": 0}, r"max_boxes must be >= 1"),
        ({"num_epochs": -1}, r"num_epochs must be >= 1, got -1"),
        ({"seed": 1.5}, r"seed must be an integer or None, got 1\.5"),
        ({"drop_remainder": 1}, r"drop_remainder must be true or false or None, got 1"),
        ({"masks": "PNG"}, r"masks must be one of"),
        ({"augment": [{"resize_image": {"new_width": -1}}]}, r"augment step #1: .*'new_width'"),
    ],
)
def test_validation(changes, pattern):
    with pytest.raises(ConfigError, match=pattern):
        PipelineConfig(**changes)
    # replace() validates too.
    with pytest.raises(ConfigError, match=pattern):
        dataclasses.replace(PipelineConfig(), **changes)


def test_config_and_make_dataset_share_one_check_per_option():
    with pytest.raises(ConfigError, match=r"^num_readers must be >= 1, got 0$"):
        PipelineConfig(num_readers=0)
    with pytest.raises(ValueError, match=r"^reading num_readers must be >= 1, got 0$"):
        ReadOptions(num_readers=0)
    with pytest.raises(ConfigError, match=r"^max_boxes must be an integer or None, got True$"):
        PipelineConfig(max_boxes=True)
    with pytest.raises(ValueError, match=r"^max_boxes must be an integer or None, got True$"):
        make_dataset("x.tfrecord", max_boxes=True)
    # What make_dataset takes, a config takes: None batches nothing; a setting that differs
    # from make_dataset's default (shuffle None: the source's) is passed on.
    unbatched = PipelineConfig(batch_size=None, shuffle=False)
    assert unbatched.to_dataset_kwargs() == {"batch_size": None, "shuffle": False}
    assert PipelineConfig(shuffle=True).to_dataset_kwargs() == {"shuffle": True}
    # 0 epochs is the Object Detection API's "forever"; a float is still refused.
    assert PipelineConfig(num_epochs=0).num_epochs is None
    with pytest.raises(ConfigError, match=r"num_epochs must be an integer or None, got 0\.0"):
        PipelineConfig(num_epochs=0.0)


def test_augment_keeps_given_params_and_is_copied():
    steps = [{"random_horizontal_flip": {"probability": 1.0}}]
    config = PipelineConfig(augment=steps)
    kwargs = config.to_dataset_kwargs()
    kwargs["augment"][0]["random_horizontal_flip"]["probability"] = 0.0
    assert config.augment == [{"random_horizontal_flip": {"probability": 1.0}}]


# --- end to end through make_dataset ---------------------------------------------------------


def test_make_dataset_from_yaml_config(synthetic_dir):
    (synthetic_dir / "classes.pbtxt").write_text(
        'item { id: 1 name: "rectangle" } item { id: 2 name: "ellipse" } '
        'item { id: 3 name: "triangle" }'
    )
    path = synthetic_dir / "config.yaml"
    path.write_text(
        "input_paths: synthetic*\n"
        "label_map_path: classes.pbtxt\n"
        "batch_size: 2\n"
        "seed: 1\n"
        "max_boxes: 8\n"
        "augment:\n"
        "  - random_horizontal_flip\n"
        "  - resize_image: {new_height: 32, new_width: 48}\n"
    )
    dataset = make_dataset(config=load_pipeline_config(path))
    batch = next(iter(dataset))
    assert batch[fields.IMAGE].shape == (2, 32, 48, 3)
    classes = batch[fields.CLASSES].numpy()
    assert set(classes[classes > 0].tolist()) <= {1, 2, 3}
    assert not math.isnan(float(tf.reduce_sum(batch[fields.BOXES])))
