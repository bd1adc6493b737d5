"""WriteOptions: as an object, a dict or keywords, and refused before anything is written."""

from pathlib import Path

import pytest
from converter_files import (
    QUIET,
    random_image,
    save_image,
)

from object_input.converters import (
    WriteOptions,
    convert_folders,
)


def test_write_options_as_an_object_a_dict_or_keywords_write_the_same_records(tmp_path, rng):
    for name in ("a", "b", "c"):
        save_image(tmp_path / "root" / name / "x.png", random_image(rng, 4, 4))
    flat = convert_folders(
        tmp_path / "root",
        tmp_path / "flat" / "t",
        num_shards=2,
        seed=3,
        compression="GZIP",
        **QUIET,
    )
    given = WriteOptions(num_shards=2, seed=3, compression="GZIP", progress=False)
    as_object = convert_folders(tmp_path / "root", tmp_path / "object" / "t", write=given)
    as_dict = convert_folders(
        tmp_path / "root",
        tmp_path / "dict" / "t",
        write={"num_shards": 2, "seed": 3},
        compression="GZIP",
        **QUIET,
    )
    assert [Path(p).name for p in flat.paths] == [
        "t-00000-of-00002.tfrecord.gz",
        "t-00001-of-00002.tfrecord.gz",
    ]
    for paths in (as_object.paths, as_dict.paths):
        assert [Path(p).read_bytes() for p in paths] == [Path(p).read_bytes() for p in flat.paths]
    # A keyword replaces that field of `write`: another seed, another order.
    reseeded = convert_folders(tmp_path / "root", tmp_path / "seed" / "t", write=given, seed=4)
    assert [Path(p).read_bytes() for p in reseeded.paths] != [
        Path(p).read_bytes() for p in flat.paths
    ]


@pytest.mark.parametrize(
    "write, error, match",
    [
        ({"num_shard": 2}, TypeError, r"no field 'num_shard'; did you mean 'num_shards'"),
        ({"num_shards": 0}, ValueError, r"num_shards must be an integer >= 1 or None, got 0"),
        ({"num_workers": 1.5}, ValueError, r"num_workers must be an integer >= 1 or None"),
        ({"compression": "ZLIB"}, ValueError, r"compression must be None or 'GZIP', got 'ZLIB'"),
        ({"seed": None}, ValueError, r"seed must be an integer, got None"),
        ({"on_error": "ignore"}, ValueError, r"on_error must be 'skip' or 'raise', got 'ignore'"),
        ("GZIP", TypeError, r"write must be a WriteOptions or a dict of its fields, got 'GZIP'"),
    ],
)
def test_bad_write_options_are_refused_before_anything_is_written(tmp_path, write, error, match):
    with pytest.raises(error, match=match):
        convert_folders(tmp_path / "missing", tmp_path / "out" / "t", write=write)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shards'"):
        convert_folders(tmp_path / "missing", tmp_path / "out" / "t", shards=2)
    assert not (tmp_path / "out").exists()
