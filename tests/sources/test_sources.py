"""The source seam: formats from suffixes, source objects, gfile paths, and make_dataset's API."""

import inspect
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.config.pipeline_config import PipelineConfig
from object_input.options import DEFAULTS
from object_input.sources import Dataset, TFRecord, as_source


def _ids(dataset):
    return [sid for batch in dataset for sid in batch[fields.SOURCE_ID].numpy().tolist()]


def test_unknown_suffix_names_the_file_and_lists_formats(tmp_path):
    path = tmp_path / "labels.txt"
    path.write_text("a,b\n")
    with pytest.raises(ValueError, match=r"labels\.txt.*pass format=.*tfrecord \(\.tfrecord"):
        oi.make_dataset(str(path))


def test_annotations_images_and_class_folders_are_told_to_be_converted_first(tmp_path):
    formats = "Otherwise pass format= or a source object from object_input.sources. Formats: "
    coco = tmp_path / "instances_val2017.json"
    coco.write_text("{}")
    with pytest.raises(ValueError) as raised:
        oi.make_dataset(str(coco))
    assert str(raised.value).startswith(
        f"cannot tell the format of {str(coco)!r} from its suffix: a COCO annotation file? "
        "Convert it to TFRecords first: object-input convert coco ANNOTATIONS IMAGES -o OUT "
        f"(docs/converters.md). {formats}"
    )
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "a.JPG").write_bytes(b"")
    with pytest.raises(ValueError) as raised:
        oi.make_dataset(str(tmp_path / "photos"))
    assert str(raised.value).startswith(
        f"cannot tell the format of {str(tmp_path / 'photos' / 'a.JPG')!r} from its suffix: "
        "images? Convert them, with their annotations, to TFRecords first: object-input convert "
        "folders ROOT -o OUT (ROOT/<class>/<image>), or convert voc, coco or csv "
        f"(docs/converters.md). {formats}"
    )
    (tmp_path / "flowers" / "rose").mkdir(parents=True)
    with pytest.raises(FileNotFoundError) as raised:
        oi.make_dataset(str(tmp_path / "flowers"))
    assert str(raised.value) == (
        f"no input files match {str(tmp_path / 'flowers')!r}, only folders: class folders "
        "(ROOT/<class>/<image>)? Convert them to TFRecords first: object-input convert folders "
        "ROOT -o OUT (docs/converters.md)"
    )
    (tmp_path / "VOC2012" / "Annotations").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"a Pascal VOC folder\? Convert it to TFRecords "):
        oi.make_dataset(str(tmp_path / "VOC2012"))
    with pytest.raises(FileNotFoundError, match=r"^no input files match '[^']*missing'$"):
        oi.make_dataset(str(tmp_path / "missing"))


def test_format_argument_reads_files_of_any_suffix(synthetic_dir, tmp_path):
    for i, path in enumerate(sorted(synthetic_dir.glob("*.tfrecord"))):
        shutil.copy(path, tmp_path / f"part{i}.dat")
    by_format = oi.make_dataset(str(tmp_path / "*.dat"), format="tfrecord", shuffle=False)
    by_suffix = oi.make_dataset(str(synthetic_dir), shuffle=False)
    assert sorted(_ids(by_format)) == sorted(_ids(by_suffix))
    assert len(_ids(by_suffix)) == 24
    with pytest.raises(ValueError, match=r"unknown format 'tfrecrod'; formats: .*tfrecord"):
        oi.make_dataset(str(tmp_path), format="tfrecrod")


def test_ram_filesystem_directory_is_listed_through_gfile(synthetic_dir):
    tf.io.gfile.makedirs("ram://seam/data")
    for path in sorted(synthetic_dir.glob("*.tfrecord")):
        tf.io.gfile.copy(str(path), f"ram://seam/data/{path.name}", overwrite=True)
    ids = _ids(oi.make_dataset("ram://seam/data", batch_size=4, shuffle=False))
    assert sorted(ids) == sorted(_ids(oi.make_dataset(str(synthetic_dir), shuffle=False)))


def test_source_object_equals_path(synthetic_dir):
    kwargs = {"batch_size": 4, "seed": 2, "augment": ["random_horizontal_flip"]}
    a = list(oi.make_dataset(TFRecord(synthetic_dir, masks="png"), **kwargs))
    b = list(oi.make_dataset(str(synthetic_dir), masks="png", **kwargs))
    assert len(a) == len(b) == 6
    for x, y in zip(a, b, strict=True):
        assert set(x) == set(y)
        for name in x:
            np.testing.assert_array_equal(x[name].numpy(), y[name].numpy())


def test_path_decoding_options_on_a_source_object_are_an_error(synthetic_dir):
    with pytest.raises(ValueError, match="masks applies to path sources; give it to the TFRecord"):
        oi.make_dataset(TFRecord(synthetic_dir), masks="png")


@pytest.mark.parametrize("bad", [42, b"bytes", {"image": 1}, [1, 2]])
def test_unsupported_source_type_names_the_parameter(bad):
    with pytest.raises(TypeError, match=r"^source must be a path, glob, directory"):
        oi.make_dataset(bad)


def test_missing_source():
    with pytest.raises(ValueError, match="make_dataset needs a source"):
        oi.make_dataset()


def test_tf_data_dataset_of_feature_dicts_flows_through_augment_and_batching():
    images = np.arange(2 * 4 * 6 * 3, dtype=np.uint8).reshape(2, 4, 6, 3)
    boxes = np.array([[[0.0, 0.0, 0.5, 0.5]], [[0.5, 0.5, 1.0, 1.0]]], np.float32)
    ds = tf.data.Dataset.from_tensor_slices(
        {fields.IMAGE: images, fields.BOXES: boxes, fields.CLASSES: np.array([[1], [2]], np.int32)}
    )
    augment = [("random_horizontal_flip", {"probability": 1.0})]
    (batch,) = oi.make_dataset(ds, batch_size=2, augment=augment, shuffle=False)
    np.testing.assert_array_equal(batch[fields.IMAGE].numpy(), images[:, :, ::-1])
    np.testing.assert_allclose(
        batch[fields.BOXES].numpy(), [[[0.0, 0.5, 0.5, 1.0]], [[0.5, 0.0, 1.0, 0.5]]]
    )
    assert batch[fields.RECORD_ID].numpy().tolist() == [b"dataset:0", b"dataset:1"]
    assert isinstance(as_source(ds), Dataset)


def test_hub_datasets_are_told_apart_without_importing_their_packages(monkeypatch):
    # Importing these now would raise ImportError: as_source must not try.
    for module in ("datasets", "tensorflow_datasets", "tensorflow_datasets.core"):
        monkeypatch.setitem(sys.modules, module, None)
    ds = tf.data.Dataset.from_tensor_slices({fields.LABEL: np.arange(3, dtype=np.int32)})
    assert isinstance(as_source(ds), Dataset)
    with pytest.raises(TypeError, match=r"^source must be a path, .* a Hugging Face datasets"):
        as_source({"train": ds})


def test_dataset_source_shards_by_element():
    ds = tf.data.Dataset.from_tensor_slices({fields.LABEL: np.arange(7, dtype=np.int32)})
    got = [
        [
            int(x[fields.LABEL])
            for x in oi.make_dataset(
                ds,
                batch_size=None,
                shuffle=False,
                reading=oi.ReadOptions(num_shards=3, shard_index=i),
            )
        ]
        for i in range(3)
    ]
    assert got == [[0, 3, 6], [1, 4], [2, 5]]


def test_dataset_source_needs_feature_dicts():
    with pytest.raises(TypeError, match="feature dicts"):
        Dataset(tf.data.Dataset.range(3))


def test_batch_size_none_yields_single_examples(synthetic_dir):
    examples = list(oi.make_dataset(str(synthetic_dir), batch_size=None, shuffle=False))
    assert len(examples) == 24
    assert examples[0][fields.IMAGE].shape.rank == 3
    assert examples[0][fields.NUM_BOXES].shape.rank == 0


def test_unknown_keyword_names_the_closest_parameters(synthetic_dir):
    with pytest.raises(TypeError, match=r"'batchsize'; did you mean 'batch_size'"):
        oi.make_dataset(str(synthetic_dir), batchsize=4)
    with pytest.raises(
        TypeError, match=r"ReadOptions got .*'num_reader'; did you mean 'num_readers'"
    ):
        oi.make_dataset(str(synthetic_dir), reading={"num_reader": 2})


@pytest.mark.parametrize(
    "options, message",
    [
        (
            {"num_readers": 4},
            "make_dataset() got an unexpected keyword argument 'num_readers'; num_readers is a "
            "ReadOptions field: pass reading={'num_readers': ...}",
        ),
        (
            {"use_display_name": True},
            "make_dataset() got an unexpected keyword argument 'use_display_name'; "
            "use_display_name is a DecodeOptions field: pass decoding={'use_display_name': ...}",
        ),
        (
            {"job_name": "train"},
            "make_dataset() got an unexpected keyword argument 'job_name'; job_name is a "
            "ServiceOptions field: pass service={'job_name': ...}",
        ),
        (
            {"decoding": {"masks": "png"}},
            "DecodeOptions got an unexpected keyword argument 'masks'; masks is a make_dataset "
            "keyword: make_dataset(masks=...)",
        ),
        (
            {"decoding": {"compression": "GZIP"}},
            "DecodeOptions got an unexpected keyword argument 'compression'; compression is a "
            "ReadOptions field: pass reading={'compression': ...}",
        ),
        (
            {"reading": {"speed": 1}},
            "ReadOptions got an unexpected keyword argument 'speed' (known: block_length, "
            "compression, file_shuffle, input_context, num_readers, num_shards, shard_index)",
        ),
    ],
)
def test_an_unknown_keyword_says_where_it_goes(synthetic_dir, options, message):
    with pytest.raises(TypeError) as raised:
        oi.make_dataset(str(synthetic_dir), **options)
    assert str(raised.value) == message


def test_an_unknown_keyword_close_to_none_lists_every_keyword(synthetic_dir):
    with pytest.raises(TypeError) as raised:
        oi.make_dataset(str(synthetic_dir), num_classes=3)
    names = sorted(inspect.signature(oi.make_dataset).parameters)
    assert str(raised.value) == (
        "make_dataset() got an unexpected keyword argument 'num_classes' "
        f"(known: {', '.join(names)})"
    )


def test_scalar_image_size_is_an_error_naming_the_parameter(synthetic_dir):
    with pytest.raises(TypeError, match=r"image_size takes \(height, width\).*\(512, 512\)"):
        oi.make_dataset(str(synthetic_dir), image_size=512)
    with pytest.raises(ValueError, match=r"pad_image_size must be \(height, width\)"):
        oi.make_dataset(str(synthetic_dir), pad_image_size=(4, 0))


def test_string_augment_is_an_error_naming_the_parameter(synthetic_dir):
    with pytest.raises(TypeError, match=r"augment must be a list of steps.*\['random_horizontal"):
        oi.make_dataset(str(synthetic_dir), augment="random_horizontal_flip")


def test_signature_shows_every_parameter_with_its_default():
    params = inspect.signature(oi.make_dataset).parameters
    assert repr(params["batch_size"].default) == "32"
    assert repr(params["num_epochs"].default) == "1"
    assert all(p.kind is p.KEYWORD_ONLY for name, p in params.items() if name != "source")
    # None: drop the remainder with static batching only.
    assert DEFAULTS["drop_remainder"] is None and DEFAULTS["shuffle_buffer_size"] == 2048


def test_pipeline_config_defaults_are_make_datasets():
    config = PipelineConfig()
    assert config.batch_size == DEFAULTS["batch_size"]
    assert config.drop_remainder == DEFAULTS["drop_remainder"]
    assert config.num_epochs == DEFAULTS["num_epochs"]
    assert config.num_readers == oi.ReadOptions().num_readers
    assert config.read_block_length == oi.ReadOptions().block_length
    assert config.to_dataset_kwargs() == {}
