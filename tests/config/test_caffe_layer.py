"""load_data_layer: a Caffe net prototxt's Data layer → make_dataset, checked pixel by pixel against
Caffe's arithmetic (caffe_db.reference) in the TRAIN and TEST phases; prototxt errors."""

import itertools

import caffe_db
import numpy as np
import pytest

import object_input as oi
from object_input import fields
from object_input.config.caffe import load_data_layer
from object_input.config.textproto import TextFormatError
from object_input.ops import ConfigError

H, W, C, N = 6, 7, 3, 5

NET = """
name: "TinyNet"
layer {
  name: "data"
  type: "Data"
  top: "data"
  top: "label"
  include { phase: TRAIN }
  transform_param {
    mirror: true
    crop_size: 4
    mean_file: "mean.binaryproto"
    scale: 0.00390625
  }
  data_param { source: "train_lmdb" batch_size: 2 backend: LMDB }
}
layer {
  name: "data"
  type: "Data"
  top: "data"
  top: "label"
  include { phase: TEST }
  transform_param { crop_size: 4 mean_value: 104 mean_value: 117 mean_value: 123 scale: 0.017 }
  data_param { source: "train_lmdb" batch_size: 3 backend: LMDB }
}
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }
"""


@pytest.fixture(scope="module")
def caffe_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("caffe")
    rng = np.random.default_rng(4)
    datums = [rng.integers(0, 256, [C, H, W], np.uint8) for _ in range(N)]
    records = {
        b"%08d_img%d.png" % (i, i): caffe_db.raw_datum(np.transpose(d, [1, 2, 0]), i)
        for i, d in enumerate(datums)
    }
    caffe_db.write_lmdb(root / "train_lmdb", records)
    mean = rng.uniform(0, 255, [C, H, W]).astype(np.float32)
    (root / "mean.binaryproto").write_bytes(caffe_db.blob(mean))
    (root / "train_val.prototxt").write_text(NET)
    return root, datums, mean


def _examples(layer, **kwargs):
    dataset = oi.make_dataset(config=layer, **kwargs)
    examples = []
    for batch in dataset:
        examples += [
            {k: v[i].numpy() for k, v in batch.items()} for i in range(len(batch[fields.LABEL]))
        ]
    return examples


def test_train_phase_matches_caffe_every_pixel(caffe_dir):
    root, datums, mean = caffe_dir
    layer = load_data_layer(root / "train_val.prototxt", phase="TRAIN", root=root)
    assert (layer.name, layer.phase, layer.batch_size) == ("data", "TRAIN", 2)
    assert layer.transform == {
        "training": True,
        "mirror": True,
        "crop_size": 4,
        "mean_file": str(root / "mean.binaryproto"),
        "scale": 0.00390625,
    }
    candidates = list(itertools.product(range(H - 3), range(W - 3)))
    seen = set()
    examples = _examples(layer, seed=11, num_epochs=3)
    # Key order, as Caffe reads; every example (epochs too) draws its own crop and mirror.
    assert [int(e[fields.LABEL]) for e in examples] == list(range(N)) * 3
    for example in examples:
        got = caffe_db.planar_bgr(example[fields.IMAGE])
        datum = datums[int(example[fields.LABEL])]
        found = [
            (offset, mirror)
            for offset in candidates
            for mirror in (False, True)
            if np.array_equal(
                got,
                caffe_db.reference(
                    datum, mean=mean, scale=0.00390625, crop=4, offset=offset, mirror=mirror
                ),
            )
        ]
        assert len(found) == 1
        seen.add(found[0])
    assert len(seen) >= 8 and {mirror for _, mirror in seen} == {False, True}


@pytest.mark.slow
def test_same_seed_same_batches_and_test_phase_is_centred(caffe_dir):
    root, datums, _ = caffe_dir
    train = load_data_layer(root / "train_val.prototxt", root=root)
    a, b = _examples(train, seed=3), _examples(train, seed=3)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x[fields.IMAGE], y[fields.IMAGE])
    test = load_data_layer(str(root / "train_val.prototxt"), phase="test", root=root)
    assert test.batch_size == 3 and test.transform["training"] is False
    examples = _examples(test)
    assert [e[fields.IMAGE].shape for e in examples] == [(4, 4, 3)] * N
    for example in examples:
        want = caffe_db.reference(
            datums[int(example[fields.LABEL])],
            mean_values=[104.0, 117.0, 123.0],
            scale=0.017,
            crop=4,
            offset=(1, 1),
        )
        np.testing.assert_array_equal(caffe_db.planar_bgr(example[fields.IMAGE]), want)


def test_a_single_layer_as_text(caffe_dir):
    root, datums, _ = caffe_dir
    layer = load_data_layer(
        'layer { type: "Data" data_param { source: "train_lmdb" batch_size: 5 backend: LMDB } }',
        root=root,
    )
    batch = next(iter(oi.make_dataset(config=layer)))
    np.testing.assert_array_equal(
        batch[fields.IMAGE][2], np.transpose(datums[2], [1, 2, 0])[..., ::-1]
    )
    bare = load_data_layer(
        'type: "Data" data_param { source: "train_lmdb" batch_size: 1 }', phase="TEST", root=root
    )
    assert bare.transform == {"training": False}  # backend unset but the folder is an LMDB


@pytest.mark.parametrize(
    ("text", "error", "match", "phase"),
    [
        (
            'layer {\n type: "Data"\n data_param { source: "x" batch_size: 1\n'
            " backend: LEVELDB } }",
            TextFormatError,
            r"<prototxt>:4:\d+: data_param.backend LEVELDB is not supported",
            "TRAIN",
        ),
        (
            'layer { type: "Data" data_param { source: "nowhere" batch_size: 1 } }',
            TextFormatError,
            "backend is not set, so Caffe reads LEVELDB",
            "TRAIN",
        ),
        (
            'layer { type: "Data"\n transform_param { mirow: true }\n'
            ' data_param { source: "train_lmdb" batch_size: 1 backend: LMDB } }',
            TextFormatError,
            r"<prototxt>:2:\d+: unknown field 'mirow' in transform_param; did you mean 'mirror'",
            "TRAIN",
        ),
        (
            'layer { type: "Data"\n transform_param { mean_file: "mean.binaryproto" mean_value: 1 }'
            '\n data_param { source: "train_lmdb" batch_size: 1 backend: LMDB } }',
            ConfigError,
            r"<prototxt>:2:\d+: transform_param: .*mean_file or mean_value, not both",
            "TRAIN",
        ),
        (
            'layer { type: "Data"\n data_param { source: "train_lmdb" backend: LMDB } }',
            TextFormatError,
            r"<prototxt>:2:\d+: missing field 'batch_size'",
            "TRAIN",
        ),
        (
            'layer { type: "Data"\n data_param { source: "train_lmdb" batch_size: 1 scale: 0.5 } }',
            TextFormatError,
            "data_param.scale is the old place",
            "TRAIN",
        ),
        (
            'layers { type: DATA data_param { source: "x" batch_size: 1 } }',
            TextFormatError,
            "V1 'layers' format",
            "TRAIN",
        ),
        (
            'layer { type: "Data" include { phase: TRAIN }\n'
            ' data_param { source: "a" batch_size: 1 } }'
            '\nlayer { type: "ImageData" include { phase: TEST } }',
            TextFormatError,
            r"no layer of type \"Data\" or .* in phase TEST .*other layer types: ImageData",
            "TEST",
        ),
        (
            'layer { type: "Data" data_param { source: "a" batch_size: 1 } }\n'
            'layer { type: "Data" exclude { phase: TEST }\n'
            ' data_param { source: "b" batch_size: 1 } }',
            TextFormatError,
            "2 data layers in phase TRAIN",
            "TRAIN",
        ),
    ],
)
def test_prototxt_errors_name_the_line_and_field(caffe_dir, text, error, match, phase):
    with pytest.raises(error, match=match):
        load_data_layer(text, root=caffe_dir[0], phase=phase)


def test_a_missing_prototxt_file_and_a_bad_phase():
    with pytest.raises(FileNotFoundError, match="no prototxt file"):
        load_data_layer("missing.prototxt")
    with pytest.raises(ValueError, match="phase must be one of"):
        load_data_layer("layer {}", phase="VAL")
