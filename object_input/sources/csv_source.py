"""CSV files, streamed line by line: one ``{column: tensor}`` feature dict per row."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.reliability import errors
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.sources._files import PathSource, list_files, read_files
from object_input.sources._resolve import register_format

SUFFIXES = (".csv",)
#: data rows of the first file that column types are inferred from.
INFERENCE_ROWS = 100
DTYPES = (tf.int32, tf.int64, tf.float32, tf.float64, tf.string)

# What tf.strings.to_number accepts, as patterns that Python's re and RE2 read alike. Integers
# are limited to 18 digits so that parsing through int64 cannot overflow.
_INT = r"\s*[+-]?[0-9]{1,18}\s*"
_FLOAT = r"\s*[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))\s*"
_INT32_RANGE = (-(2**31), 2**31 - 1)


@dataclasses.dataclass(frozen=True)
class Column:
    """One column read from the files: its name, position, type and default."""

    name: str
    index: int
    dtype: tf.DType
    #: the value of an empty (or NA) field; None: the column is required.
    default: Any
    #: whether the type was inferred from the first rows (not given by ``record_defaults``).
    inferred: bool = False

    @property
    def numeric(self) -> bool:
        return self.dtype != tf.string


class CSV(Source):
    """CSV files read line by line (never loaded whole): one ``{column: tensor}`` dict per row.

    Columns get their types from ``record_defaults`` or, failing that, from the first
    :data:`INFERENCE_ROWS` rows of the first file: int32 (int64 when a value needs it), float32,
    else string. An empty field, or one equal to ``na_value``, takes the column's default (0,
    0.0, "" when inferred); a column whose default is a dtype is required. Quoted fields may hold
    the delimiter and doubled quotes (``"a ""b"", c"``), not line breaks. Empty lines are
    skipped. Record ids are ``"path:line N"`` with N the 1-based line of the file.

    A row with the wrong number of fields, bad quoting, or a value that does not parse as its
    column's type is an error naming the file, line and column.

    Args:
      files: glob pattern, directory, file, or list of those; all with the same columns.
      record_defaults: per column (all, or the selected ones) a default value (its type is the
        column's: int → int32, float → float32, str → string; numpy scalars keep theirs), a
        dtype (required column), or None (inferred); or ``{column name: default}``. The forms
        ``tf.io.decode_csv`` takes mean the same: ``[[1], [1.0], [""]]`` is ``[1, 1.0, ""]``,
        and an empty list or tensor (``[]`` is float32, ``tf.constant([], tf.int64)``) makes
        its column required, of its type.
      column_names: names of the columns; with ``header`` they replace the header's.
      header: the first line of every file names the columns (and is not data).
      field_delim: the one-character field separator.
      select_columns: names or 0-based indices of the columns to yield (default: all).
      na_value: a string that means "missing" (as an empty field does).
    """

    def __init__(
        self,
        files: PathSource,
        *,
        record_defaults: Sequence[Any] | Mapping[str, Any] | None = None,
        column_names: Sequence[str] | None = None,
        header: bool = True,
        field_delim: str = ",",
        select_columns: Sequence[str | int] | None = None,
        na_value: str = "",
    ):
        if not isinstance(field_delim, str) or len(field_delim) != 1 or field_delim in '"\n\r':
            raise ValueError(
                f"field_delim must be one character (not a quote), got {field_delim!r}"
            )
        if not isinstance(na_value, str):
            raise TypeError(f"na_value must be a string, got {na_value!r}")
        self.files = list_files(files, SUFFIXES)
        self.header = header
        self.field_delim = field_delim
        self.na_value = na_value
        first_rows = self._first_rows()
        names = self._names(first_rows, column_names)
        selected = _selection(names, select_columns)
        self.num_columns = len(names)
        samples = first_rows[1:] if header else first_rows
        self.columns = _columns(names, selected, record_defaults, samples, na_value)
        delim = re.escape(field_delim)
        field = f'"(?:[^"]|"")*"|[^"{delim}]*'
        self._row_pattern = f"(?:{field})(?:{delim}(?:{field}))*"

    def _first_rows(self) -> list[list[str]]:
        """The first rows of the first non-empty file; checks that every file has one header."""
        first: list[list[str]] = []
        header_of: tuple[str, str] | None = None
        for path in self.files:
            with tf.io.gfile.GFile(path, "rb") as f:
                # Rows that are not UTF-8 fail when they are decoded, naming their line.
                lines = (line.decode("utf-8", "replace") for line in f)
                rows = list(
                    itertools.islice(
                        csv.reader(lines, delimiter=self.field_delim),
                        1 + INFERENCE_ROWS if not first else 1,
                    )
                )
            if not rows:
                continue
            if not first:
                first = rows
                if not self.header:
                    break
            if self.header:
                line = self.field_delim.join(rows[0])
                if header_of is None:
                    header_of = (path, line)
                elif line != header_of[1]:
                    raise ValueError(
                        f"{path}: header {line!r} differs from {header_of[0]}'s {header_of[1]!r};"
                        " every file of a CSV source needs the same columns"
                    )
        if not first:
            raise ValueError(f"the CSV files are empty: {self.files[:3]}")
        if first[0] and first[0][0].startswith("\ufeff"):
            first[0][0] = first[0][0][1:]
        return first

    def _names(self, rows: list[list[str]], column_names: Sequence[str] | None) -> list[str]:
        count = len(rows[0])
        if column_names is not None:
            names = [str(n) for n in column_names]
            if len(names) != count:
                raise ValueError(
                    f"column_names has {len(names)} names but {self.files[0]} has {count} "
                    f"columns: {rows[0]}"
                )
        elif self.header:
            names = [name.strip() or f"column_{i}" for i, name in enumerate(rows[0])]
        else:
            names = [f"column_{i}" for i in range(count)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"CSV column names must be unique; repeated: {duplicates}")
        return names

    def records(self, context: ReadContext) -> tf.data.Dataset:
        skip = 1 if self.header else 0

        def read(path: tf.Tensor) -> tf.data.Dataset:
            return tf.data.TextLineDataset(path).skip(skip)

        lines = read_files(self.files, read, context, index_name="line ", first_index=1 + skip)
        return lines.filter(lambda record_id, line: tf.strings.length(line) > 0)

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        line = payload
        checks = errors.RecordChecks(record_id)
        # Messages quote the row as UTF-8 (bad bytes as U+FFFD): Python could not show it else.
        shown = tf.strings.unicode_transcode(line, "UTF-8", "UTF-8", errors="replace")
        utf8 = checks.add(tf.equal(shown, line), "undecodable", "is not UTF-8 text:", shown)
        quoted = checks.add(
            checks.when(utf8, lambda: tf.strings.regex_full_match(line, self._row_pattern)),
            "undecodable",
            "is not a well-formed CSV row (a quoted field ends with a quote before the delimiter,"
            " and quotes inside it are doubled):",
            line,
        )
        unquoted = tf.strings.regex_replace(line, '"(?:[^"]|"")*"', "")
        count = tf.size(tf.strings.split(unquoted, self.field_delim))
        checks.add(
            checks.when(quoted, lambda: tf.equal(count, self.num_columns)),
            "undecodable",
            "has",
            count,
            f"fields, expected {self.num_columns}",
        )
        # A malformed row is parsed as an empty one (decode_csv would raise); the flag carries
        # its error, for the pipeline to raise or skip.
        well_formed = tf.equal(checks.error_code(), errors.OK)
        line = tf.where(well_formed, line, self.field_delim * (self.num_columns - 1))
        indices = [c.index for c in self.columns]
        raw = tf.io.decode_csv(
            line,
            [""] * len(indices),
            field_delim=self.field_delim,
            select_cols=indices if len(indices) < self.num_columns else None,
        )
        names = [c.name for c in self.columns]
        values = _convert(dict(zip(names, raw, strict=True)), self.columns, self.na_value, checks)
        values.setdefault(fields.RECORD_ID, record_id)
        return checks.flag(values)

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> CSV:
        rows = [f"{i},{i / 2},name{i}" for i in range(samples.RECORDS)]
        if damage == samples.CERTAIN:
            rows[samples.DAMAGED] = "1,2"
        elif damage is not None:
            rows[samples.DAMAGED] = samples.mutated(rows[samples.DAMAGED].encode(), damage).decode(
                "latin-1"
            )
        path = os.path.join(folder, "sample.csv")
        with open(path, "w", encoding="latin-1", newline="") as f:
            f.write("\n".join(["count,ratio,name", *rows]) + "\n")
        return cls(path, record_defaults=[0, 0.0, "none"])

    def __repr__(self) -> str:
        columns = ", ".join(f"{c.name}: {c.dtype.name}" for c in self.columns)
        return f"CSV({len(self.files)} files, first {self.files[0]!r}, columns {{{columns}}})"


def _convert(
    raw: dict[str, tf.Tensor],
    columns: Sequence[Column],
    na_value: str,
    checks: errors.RecordChecks,
) -> dict[str, tf.Tensor]:
    """Each field in its column's type, defaults for missing ones; bad values are checks (and
    parse as the default)."""
    out = {}
    for column in columns:
        text = raw[column.name]
        absent = tf.equal(text, "")
        if na_value:
            absent |= tf.equal(text, na_value)
        # Backquotes: the error message escapes quotes.
        where = f"column `{column.name}` (field {column.index + 1})"
        if column.default is None:
            checks.add(~absent, "undecodable", f"{where} is empty and has no default")
        default = tf.constant(
            column.default if column.default is not None else _zero(column.dtype), column.dtype
        )
        if not column.numeric:
            out[column.name] = tf.where(absent, default, text)
            continue
        pattern = _INT if column.dtype.is_integer else _FLOAT
        valid = tf.strings.regex_full_match(text, pattern)
        if column.dtype == tf.int32:
            # when() is True where its condition fails: keep the pattern's verdict there.
            valid &= checks.when(valid, lambda t=text: _in_int32_range(t))
        checks.add(
            absent | valid,
            "undecodable",
            f"{where}: value",
            text,
            f"is not a valid {column.dtype.name}",
            "(the type was inferred from the first rows; pass record_defaults to set it)"
            if column.inferred
            else "(the type record_defaults gives the column)",
        )
        number = tf.strings.to_number(tf.where(valid & ~absent, text, "0"), column.dtype)
        out[column.name] = tf.where(valid & ~absent, number, default)
    return out


def _in_int32_range(text: tf.Tensor) -> tf.Tensor:
    value = tf.strings.to_number(text, tf.int64)
    return (value >= _INT32_RANGE[0]) & (value <= _INT32_RANGE[1])


def _zero(dtype: tf.DType) -> Any:
    return "" if dtype == tf.string else 0


def _selection(names: list[str], select_columns: Sequence[str | int] | None) -> list[int]:
    if select_columns is None:
        return list(range(len(names)))
    if isinstance(select_columns, (str, int)):
        raise TypeError(f"select_columns must be a list, got {select_columns!r}")
    indices = []
    for item in select_columns:
        if isinstance(item, int) and not isinstance(item, bool):
            if not 0 <= item < len(names):
                raise ValueError(f"select_columns: index {item} is outside 0..{len(names) - 1}")
            indices.append(item)
        elif item in names:
            indices.append(names.index(item))
        else:
            raise ValueError(f"select_columns: no column {item!r}; the columns are {names}")
    if len(set(indices)) != len(indices):
        raise ValueError(f"select_columns names a column twice: {list(select_columns)}")
    return sorted(indices)


def _columns(
    names: list[str],
    selected: list[int],
    record_defaults: Sequence[Any] | Mapping[str, Any] | None,
    samples: list[list[str]],
    na_value: str,
) -> list[Column]:
    given: dict[int, Any] = {}
    if isinstance(record_defaults, Mapping):
        for name, value in record_defaults.items():
            if name not in names:
                raise ValueError(f"record_defaults: no column {name!r}; the columns are {names}")
            given[names.index(name)] = value
    elif record_defaults is not None:
        values = list(record_defaults)
        if len(values) == len(names):
            given = dict(enumerate(values))
        elif len(values) == len(selected):
            given = dict(zip(selected, values, strict=True))
        else:
            raise ValueError(
                f"record_defaults has {len(values)} entries; expected one per column "
                f"({len(names)}) or per selected column ({len(selected)})"
            )
    columns = []
    for index in selected:
        value = given.get(index)
        if value is None:
            dtype = _infer([row[index] for row in samples if index < len(row)], na_value)
            columns.append(Column(names[index], index, dtype, _zero(dtype), inferred=True))
        else:
            columns.append(_declared(names[index], index, value))
    return columns


def _declared(name: str, index: int, value: Any) -> Column:
    if isinstance(value, (tf.DType, type)):
        dtype = tf.as_dtype({int: tf.int32, float: tf.float32, str: tf.string}.get(value, value))
        default = None
    else:
        tensor = tf.convert_to_tensor(value)
        dtype, default = tensor.dtype, _unwrapped(name, value, tensor)
    if dtype not in DTYPES:
        raise ValueError(
            f"record_defaults for column {name!r}: type {dtype.name} is not one of "
            f"{[d.name for d in DTYPES]}"
        )
    return Column(name, index, dtype, default)


def _unwrapped(name: str, value: Any, tensor: tf.Tensor) -> Any:
    """The default a scalar, or ``tf.io.decode_csv``'s forms of one, gives: a one-element list
    (``[1]``) its element, an empty one (``[]``, ``tf.constant([], tf.int32)``) None (required)."""
    if tensor.shape.rank == 0:
        return tensor.numpy()
    if tensor.shape.rank == 1 and tensor.shape[0] <= 1:
        return tensor.numpy()[0] if tensor.shape[0] else None
    raise ValueError(
        f"record_defaults for column {name!r} must be a scalar, a one-element list ([1], as "
        f"tf.io.decode_csv takes) or an empty one (required), got {value!r}"
    )


def _infer(values: list[str], na_value: str) -> tf.DType:
    present = [v for v in values if v != "" and v != na_value]
    if not present:
        return tf.string
    if all(re.fullmatch(_INT, v) for v in present):
        in_range = all(_INT32_RANGE[0] <= int(v) <= _INT32_RANGE[1] for v in present)
        return tf.int32 if in_range else tf.int64
    if all(re.fullmatch(_FLOAT, v) for v in present):
        return tf.float32
    return tf.string


register_format("csv", SUFFIXES, lambda files, options: CSV(files))
