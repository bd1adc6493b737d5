"""CSV files: header, quoting, missing and NA values, types, streaming, and located errors."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.sources import CSV
from object_input.sources.csv_source import INFERENCE_ROWS

TABLE = (
    "name,count,price,label\n"
    "apple,3,1.5,0\n"
    '"pear, green",,2.25,1\n'
    '"say ""hi""",7,,1\n'
    "\n"
    "kiwi,NA,NA,0\n"
)


def _rows(source, **kwargs):
    kwargs.setdefault("shuffle", False)
    return list(oi.make_dataset(source, batch_size=None, **kwargs))


def _write(path, text):
    path.write_text(text)
    return path


def test_header_quoting_missing_values_and_na_strings(tmp_path):
    path = _write(tmp_path / "fruit.csv", TABLE)
    rows = _rows(CSV(path, na_value="NA"))
    assert [x["name"].numpy().decode() for x in rows] == [
        "apple",
        "pear, green",
        'say "hi"',
        "kiwi",
    ]
    assert [int(x["count"]) for x in rows] == [3, 0, 7, 0]
    assert [float(x["price"]) for x in rows] == [1.5, 2.25, 0.0, 0.0]
    assert [int(x[fields.LABEL]) for x in rows] == [0, 1, 1, 0]
    assert (rows[0]["count"].dtype, rows[0]["price"].dtype) == (tf.int32, tf.float32)
    # Real 1-based file lines: the header is line 1, the empty line 5 is skipped.
    assert [x[fields.RECORD_ID].numpy().decode() for x in rows] == [
        f"{path}:line {n}" for n in (2, 3, 4, 6)
    ]


def test_record_defaults_set_types_defaults_and_selection(tmp_path):
    path = _write(tmp_path / "fruit.csv", TABLE)
    source = CSV(
        path,
        record_defaults={"count": np.int64(-1), "price": 9.0},
        select_columns=["price", "count"],
        na_value="NA",
    )
    rows = _rows(source)
    assert set(rows[0]) == {"count", "price", fields.RECORD_ID}
    assert [int(x["count"]) for x in rows] == [3, -1, 7, -1]
    assert [float(x["price"]) for x in rows] == [1.5, 2.25, 9.0, 9.0]
    assert rows[0]["count"].dtype == tf.int64


def test_no_header_column_names_delimiter_and_ram_filesystem():
    tf.io.gfile.makedirs("ram://csv")
    with tf.io.gfile.GFile("ram://csv/part-0.csv", "w") as f:
        f.write("1;x\n2;y\n")
    with tf.io.gfile.GFile("ram://csv/part-1.csv", "w") as f:
        f.write("3;z\n")
    source = CSV("ram://csv", header=False, column_names=["id", "tag"], field_delim=";")
    rows = _rows(source, reading={"num_readers": 1})
    assert [(int(x["id"]), x["tag"].numpy()) for x in rows] == [(1, b"x"), (2, b"y"), (3, b"z")]
    assert rows[2][fields.RECORD_ID].numpy() == b"ram://csv/part-1.csv:line 1"
    assert [x[fields.RECORD_ID].numpy() for x in _rows("ram://csv/part-0.csv", format="csv")][
        :1
    ] == [b"ram://csv/part-0.csv:line 2"]


def test_large_integers_are_int64_and_strings_stay_strings(tmp_path):
    path = _write(tmp_path / "ids.csv", "id,code\n5000000000,007\n1,x12\n")
    (first, _) = _rows(CSV(path))
    assert first["id"].dtype == tf.int64 and int(first["id"]) == 5_000_000_000
    assert first["code"].numpy() == b"007"


@pytest.mark.slow
def test_a_csv_longer_than_the_shuffle_buffer_is_streamed(tmp_path):
    lines = 3000
    path = _write(tmp_path / "long.csv", "i\n" + "".join(f"{i}\n" for i in range(lines)))
    order = [int(x["i"]) for x in _rows(CSV(path), shuffle=True, seed=3, shuffle_buffer_size=16)]
    assert sorted(order) == list(range(lines))
    assert order != list(range(lines))
    # A streaming shuffle emits row i only after reading it: never more than the buffer early.
    assert all(row <= position + 16 for position, row in enumerate(order))


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = _write(tmp_path / "bad.csv", "a,b\n1,2\n3,4,5\n")
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"bad\.csv:line 3: has 3 fields, expected 2"
    ):
        _rows(CSV(path))


def test_unparsable_value_names_file_line_and_column(tmp_path):
    rows = "a,b\n" + "1,2\n" * 150 + '4,"x"\n'
    path = _write(tmp_path / "bad.csv", rows)
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r'bad\.csv:line 152: column `b` \(field 2\): value \\"x\\" is not a valid int32',
    ):
        _rows(CSV(path))
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r'value \\"3000000000\\" is not a valid int32'
    ):
        _rows(CSV(_write(tmp_path / "big.csv", "a\n1\n3000000000\n"), record_defaults=[0]))


@pytest.mark.parametrize(
    ("record_defaults", "hint"),
    [
        (None, "(the type was inferred from the first rows; pass record_defaults to set it)"),
        ({"weight": 0}, "(the type record_defaults gives the column)"),
    ],
)
def test_readable_errors_put_our_message_first_with_the_right_hint(tmp_path, record_defaults, hint):
    # Past the rows the types are inferred from.
    rows = "name,weight\n" + "apple,3\n" * INFERENCE_ROWS + "fig,heavy\n"
    path = _write(tmp_path / "fruit.csv", rows)
    source = CSV(path, record_defaults=record_defaults)
    line = INFERENCE_ROWS + 2
    want = (
        f'record {path}:line {line}: column `weight` (field 2): value "heavy" is not a valid '
        f"int32 {hint}"
    )
    with pytest.raises(tf.errors.InvalidArgumentError) as raised, oi.readable_errors():
        _rows(source)
    assert raised.value.message == want
    assert "function_node" not in str(raised.value) and raised.value.__cause__ is None


def test_bad_quoting_and_required_columns_are_located(tmp_path):
    path = _write(tmp_path / "q.csv", 'a,b\n"x"y,1\n')
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"q\.csv:line 2: is not a well-formed"
    ):
        _rows(CSV(path))
    path = _write(tmp_path / "r.csv", "a,b\n1,\n")
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"r\.csv:line 2: column `b` \(field 2\) is empty"
    ):
        _rows(CSV(path, record_defaults=[0, tf.float32]))


def test_construction_errors(tmp_path):
    a = _write(tmp_path / "a.csv", "x,y\n1,2\n")
    _write(tmp_path / "b.csv", "x,z\n1,2\n")
    with pytest.raises(ValueError, match=r"b\.csv: header 'x,z' differs from .*a\.csv's 'x,y'"):
        CSV(tmp_path)
    with pytest.raises(ValueError, match=r"no column 'w'; the columns are \['x', 'y'\]"):
        CSV(a, select_columns=["w"])
    with pytest.raises(ValueError, match="record_defaults has 3 entries"):
        CSV(a, record_defaults=[0, 0, 0])
    with pytest.raises(ValueError, match=r"column_names has 1 names but .* has 2 columns"):
        CSV(a, column_names=["only"])


def test_csv_through_make_dataset_batches_and_keras(tmp_path):
    path = _write(tmp_path / "t.csv", "x,y,label\n1,0.5,1\n2,1.5,0\n3,,1\n")
    (batch,) = oi.make_dataset(str(path), batch_size=3, shuffle=False)
    assert batch["x"].numpy().tolist() == [1, 2, 3]
    assert batch["y"].numpy().tolist() == [0.5, 1.5, 0.0]
    (inputs, labels), *_ = oi.make_dataset(str(path), batch_size=2, keras=True, shuffle=False)
    assert sorted(inputs) == ["x", "y"] and labels.numpy().tolist() == [1, 0]
    restored = oi.unpad_batch(batch)
    assert [int(r["x"]) for r in restored] == [1, 2, 3]


def test_bad_rows_are_skipped_and_counted_under_on_error_skip(tmp_path):
    text = "a,b\n1,2\n3,4,5\n6,x\n7,8\n"
    path = _write(tmp_path / "mixed.csv", text)
    source = CSV(path, record_defaults=[0, 0])
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [int(x["a"]) for x in dataset] == [1, 7]
    assert oi.stats(dataset).skipped == {"undecodable": 2}


def test_rows_that_are_not_utf8_are_named_or_skipped(tmp_path):
    # Reading the first rows for the column types decoded the file as UTF-8 and raised
    # UnicodeDecodeError, naming nothing.
    path = tmp_path / "latin.csv"
    path.write_bytes(b"name,count\npear,2\ncaf\xe9,3\n")
    source = CSV(str(path))
    assert [c.dtype for c in source.columns] == [tf.string, tf.int32]
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=f"record {path}:line 3: is not UTF-8 text: .*caf\ufffd,3",
    ):
        _rows(source)
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [r["name"].numpy() for r in dataset] == [b"pear"]
    assert oi.stats(dataset).skipped == {"undecodable": 1}


def test_record_defaults_in_the_tf1_form_mean_the_same(tmp_path):
    """``[[1], [1.0], [""]]``, what tf.io.decode_csv takes, reads as ``[1, 1.0, ""]``."""
    path = _write(tmp_path / "t.csv", "n,x,s\n4,2.5,a\n,,\n")
    plain = _rows(CSV(path, record_defaults=[1, 1.0, "z"]))
    wrapped = _rows(CSV(path, record_defaults=[[1], [1.0], ["z"]]))
    for rows in (plain, wrapped):
        assert [int(r["n"]) for r in rows] == [4, 1]
        assert [float(r["x"]) for r in rows] == [2.5, 1.0]
        assert [r["s"].numpy() for r in rows] == [b"a", b"z"]
        assert [rows[0][c].dtype for c in "nxs"] == [tf.int32, tf.float32, tf.string]
    source = CSV(path, record_defaults={"n": np.array([7], np.int64), "x": tf.constant([0.5])})
    assert [(c.dtype, c.default) for c in source.columns[:2]] == [(tf.int64, 7), (tf.float32, 0.5)]


def test_empty_tf1_defaults_make_required_columns_of_their_type(tmp_path):
    path = _write(tmp_path / "r.csv", "a,b\n3,1.5\n4,\n")
    source = CSV(path, record_defaults=[tf.constant([], tf.int64), []])
    assert [(c.dtype, c.default) for c in source.columns] == [(tf.int64, None), (tf.float32, None)]
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"r\.csv:line 3: column `b` \(field 2\) is empty"
    ):
        _rows(source)
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [(int(r["a"]), float(r["b"])) for r in dataset] == [(3, 1.5)]


def test_a_default_of_two_values_is_an_error_naming_its_column(tmp_path):
    path = _write(tmp_path / "t.csv", "n,x\n1,2\n")
    with pytest.raises(ValueError, match=r"record_defaults for column 'x' must be a scalar, a one"):
        CSV(path, record_defaults=[[1], [1.0, 2.0]])
    with pytest.raises(ValueError, match=r"record_defaults for column 'n' must be a scalar"):
        CSV(path, record_defaults={"n": [[1]]})
