"""load_data_layer on Caffe SSD's AnnotatedData layers, in MobileNet-SSD's train and test
prototxt layouts, over an LMDB written as create_annoset.py writes it: the dataset and steps, the
evaluation pipeline's pixels and boxes exactly, and prototxt errors naming the field."""

import io

import caffe_db
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import object_input as oi
from object_input import fields
from object_input.config.caffe import load_data_layer
from object_input.config.textproto import TextFormatError
from object_input.label_map import label_map_to_names
from object_input.ops import ConfigError
from object_input.ops.caffe_ssd import SSD_BATCH_SAMPLERS
from object_input.sources import CaffeAnnotatedLMDB

SAMPLERS = "".join(
    f"""
    batch_sampler {{
      sampler {{ min_scale: 0.3 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }}
      sample_constraint {{ {constraint} }}
      max_sample: 1
      max_trials: 50
    }}"""
    for constraint in [f"min_jaccard_overlap: {j}" for j in (0.1, 0.3, 0.5, 0.7, 0.9)]
    + ["max_jaccard_overlap: 1.0"]
)

# MobileNet-SSD's MobileNetSSD_train.prototxt: the data layer, then the net (abridged).
TRAIN = f"""
name: "MobileNet-SSD"
layer {{
  name: "data"
  type: "AnnotatedData"
  top: "data"
  top: "label"
  include {{
    phase: TRAIN
  }}
  transform_param {{
    scale: 0.007843
    mirror: true
    mean_value: 127.5
    mean_value: 127.5
    mean_value: 127.5
    resize_param {{
      prob: 1.0
      resize_mode: WARP
      height: 300
      width: 300
      interp_mode: LINEAR
      interp_mode: AREA
      interp_mode: NEAREST
      interp_mode: CUBIC
      interp_mode: LANCZOS4
    }}
    emit_constraint {{
      emit_type: CENTER
    }}
    distort_param {{
      brightness_prob: 0.5
      brightness_delta: 32.0
      contrast_prob: 0.5
      contrast_lower: 0.5
      contrast_upper: 1.5
      hue_prob: 0.5
      hue_delta: 18.0
      saturation_prob: 0.5
      saturation_lower: 0.5
      saturation_upper: 1.5
      random_order_prob: 0.0
    }}
    expand_param {{
      prob: 0.5
      max_expand_ratio: 4.0
    }}
  }}
  data_param {{
    source: "trainval_lmdb/"
    batch_size: 3
    backend: LMDB
  }}
  annotated_data_param {{
    batch_sampler {{
      max_sample: 1
      max_trials: 1
    }}{SAMPLERS}
    label_map_file: "labelmap.prototxt"
  }}
}}
layer {{
  name: "conv0"
  type: "Convolution"
  bottom: "data"
  top: "conv0"
  convolution_param {{ num_output: 32 bias_term: false pad: 1 kernel_size: 3 stride: 2 }}
}}
"""

# MobileNetSSD_test.prototxt's data layer.
TEST = """
name: "MobileNet-SSD"
layer {
  name: "data"
  type: "AnnotatedData"
  top: "data"
  top: "label"
  include {
    phase: TEST
  }
  transform_param {
    scale: 0.007843
    mean_value: 127.5
    mean_value: 127.5
    mean_value: 127.5
    resize_param {
      prob: 1.0
      resize_mode: WARP
      height: 300
      width: 300
      interp_mode: LINEAR
    }
  }
  data_param {
    source: "test_lmdb/"
    batch_size: 2
    backend: LMDB
  }
  annotated_data_param {
    batch_sampler {
    }
    label_map_file: "labelmap.prototxt"
  }
}
"""

LABELS = """item {
  name: "none_of_the_above"
  label: 0
  display_name: "background"
}
item {
  name: "aeroplane"
  label: 1
  display_name: "aeroplane"
}
item {
  name: "bicycle"
  label: 2
  display_name: "bicycle"
}
"""

OBJECTS = [
    [(1, 10, 8, 40, 30, False), (2, 30, 20, 62, 47, True)],
    [(2, 0, 0, 20, 48, False)],
    [(1, 5, 5, 60, 40, False), (1, 20, 10, 30, 20, False)],
]


def png(rgb: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def ssd_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("ssd")
    rng = np.random.default_rng(5)
    images = [rng.integers(0, 256, [48, 64, 3], np.uint8) for _ in OBJECTS]
    records = {
        b"%08d_VOC2007/JPEGImages/%06d.jpg" % (i, i): caffe_db.annoset_datum(
            png(image), (48, 64), objects
        )
        for i, (image, objects) in enumerate(zip(images, OBJECTS, strict=True))
    }
    for name in ("trainval_lmdb", "test_lmdb"):
        caffe_db.write_lmdb(root / name, records)
    (root / "labelmap.prototxt").write_text(LABELS)
    (root / "train.prototxt").write_text(TRAIN)
    (root / "test.prototxt").write_text(TEST)
    return root, images


@pytest.mark.slow
def test_train_layer_gives_source_steps_and_batch_size(ssd_dir):
    root, _ = ssd_dir
    layer = load_data_layer(root / "train.prototxt", phase="TRAIN", root=root)
    assert isinstance(layer.source, CaffeAnnotatedLMDB) and layer.batch_size == 3
    assert label_map_to_names(layer.label_map_file) == {1: "aeroplane", 2: "bicycle"}
    steps = dict(layer.ssd_steps)
    assert list(steps) == [
        "caffe_ssd_distort",
        "caffe_ssd_sample",
        "caffe_ssd_resize",
    ]
    assert steps["caffe_ssd_sample"] == {
        "batch_samplers": [dict(s) for s in SSD_BATCH_SAMPLERS],
        "emit_type": "CENTER",
        "emit_overlap": 0.0,
        "expand_prob": 0.5,
        "max_expand_ratio": 4.0,
        "mean_value": [127.5] * 3,
    }
    assert steps["caffe_ssd_resize"]["interp_mode"] == [
        "LINEAR",
        "AREA",
        "NEAREST",
        "CUBIC",
        "LANCZOS4",
    ]
    assert steps["caffe_ssd_distort"]["hue_delta"] == 18.0
    assert layer.transform == {
        "training": True,
        "scale": 0.007843,
        "mirror": True,
        "mean_value": [127.5] * 3,
    }
    batch = next(iter(oi.make_dataset(config=layer, seed=1)))
    assert batch[fields.IMAGE].shape == (3, 300, 300, 3)
    assert batch[fields.IMAGE].dtype == tf.float32
    image = batch[fields.IMAGE].numpy()
    assert image.min() >= -127.5 * 0.007843 - 1e-6 and image.max() <= 127.5 * 0.007843 + 1e-6
    boxes = batch[fields.BOXES].numpy()
    assert boxes.min() >= 0 and boxes.max() <= 1


def test_test_layer_is_the_evaluation_pipeline_exactly(ssd_dir):
    root, images = ssd_dir
    layer = load_data_layer(root / "test.prototxt", phase="TEST", root=root)
    assert [name for name, _ in layer.ssd_steps] == ["caffe_ssd_sample", "caffe_ssd_resize"]
    examples = []
    for batch in oi.make_dataset(config=layer):
        size = len(batch[fields.IMAGE])
        examples += [{k: v[i].numpy() for k, v in batch.items()} for i in range(size)]
    assert len(examples) == len(images)
    for example, image, objects in zip(examples, images, OBJECTS, strict=True):
        resized = tf.image.resize(image.astype(np.float32), [300, 300]).numpy()
        expected = (np.clip(np.round(resized), 0, 255) - np.float32(127.5)) * np.float32(0.007843)
        np.testing.assert_array_equal(example[fields.IMAGE], expected)
        n = example[fields.NUM_BOXES]
        # Every box kept, exactly as stored, in create_annoset's group order.
        by_label = sorted(objects, key=lambda o: [o[0] for o in objects].index(o[0]))
        stored = np.array([[o[2] / 48, o[1] / 64, o[4] / 48, o[3] / 64] for o in by_label])
        np.testing.assert_array_equal(example[fields.BOXES][:n], stored.astype(np.float32))
        np.testing.assert_array_equal(example[fields.CLASSES][:n], [o[0] for o in by_label])


@pytest.mark.parametrize(
    "old, new, error, match",
    [
        (
            "height: 300",
            "height: 300 foo: 1",
            TextFormatError,
            r":\d+:\d+: unknown field 'foo' in resize_param",
        ),
        (
            "min_scale: 0.3",
            "min_scal: 0.3",
            TextFormatError,
            r"unknown field 'min_scal' in sampler.*min_scale",
        ),
        (
            "min_jaccard_overlap: 0.1",
            "min_jaccard_overlap: 1.1",
            ConfigError,
            r"batch_sampler #1 min_jaccard_overlap must be in \[0, 1\]",
        ),
        (
            "expand_param {",
            "noise_param { } expand_param {",
            TextFormatError,
            r"noise_param is not supported",
        ),
        ("prob: 1.0", "prob: 0.5", TextFormatError, r"resize_param.prob below 1"),
        ("interp_mode: AREA", "interp_mode: AREAS", ConfigError, r"unknown 'AREAS'"),
        (
            "emit_type: CENTER",
            "emit_type: MIDDLE",
            TextFormatError,
            r":\d+:\d+: emit_constraint.emit_type MIDDLE is not one of CENTER, MIN_OVERLAP",
        ),
        (
            "label_map_file",
            "label_file",
            TextFormatError,
            r"unknown field 'label_file' in annotated_data_param",
        ),
        (
            'type: "AnnotatedData"',
            'type: "Data"',
            TextFormatError,
            r"unknown field 'annotated_data_param' in a Data layer",
        ),
    ],
)
def test_prototxt_errors_name_the_field(ssd_dir, old, new, error, match):
    root, _ = ssd_dir
    with pytest.raises(error, match=match):
        load_data_layer(TRAIN.replace(old, new, 1), phase="TRAIN", root=root)
