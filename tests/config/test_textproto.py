"""The protobuf text format parser: syntax, values, positions and errors."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from object_input.config import textproto
from object_input.config.textproto import Identifier, Message, TextFormatError, one, parse


def test_field_syntaxes():
    msg = parse(
        """
        a: 1
        b { c: 2 }
        b: { c: 3 }
        b < c: 4 >
        d: [1, 2, 3]
        e [ { c: 5 }, < c: 6 > ]
        f: [{ c: 7 }]
        g: []
        """
    )
    assert msg == {
        "a": [1],
        "b": [{"c": [2]}, {"c": [3]}, {"c": [4]}],
        "d": [1, 2, 3],
        "e": [{"c": [5]}, {"c": [6]}],
        "f": [{"c": [7]}],
        "g": [],
    }
    assert all(isinstance(m, Message) for m in msg["b"] + msg["e"])


def test_separators_comments_and_order():
    msg = parse("x: 1, y: 2; x: 3 # x: 4\n# whole line\nz {w: 'a';},")
    assert msg == {"x": [1, 3], "y": [2], "z": [{"w": ["a"]}]}
    assert list(msg) == ["x", "y", "z"]


def test_strings_and_escapes():
    msg = parse(
        r"""
        a: "tab\there \"q\" 'q' \\ \? \a\b\f\n\r\v"
        b: 'single "double" \''
        c: "\101\x42\u00e9\U0001F600"
        d: "con" 'cat' "enated"
        e: "\377"
        f: "# not a comment"
        g: "héllo"
        """
    )
    assert one(msg, "a") == "tab\there \"q\" 'q' \\ ? \a\b\f\n\r\v"
    assert one(msg, "b") == 'single "double" \''
    assert one(msg, "c") == "ABé\U0001f600"
    assert one(msg, "d") == "concatenated"
    assert one(msg, "e") == b"\xff"  # not UTF-8: kept as bytes
    assert one(msg, "f") == "# not a comment"
    assert one(msg, "g") == "héllo"


def test_numbers():
    msg = parse(
        "a: 12 b: -7 c: 0x1F d: 017 e: 0 f: 1.5 g: -.25 h: 1e3 i: 2.5E-2 j: 3f k: 1.0F "
        "l: inf m: -inf n: nan o: -Infinity p: - 4"
    )
    values = {k: v[0] for k, v in msg.items()}
    assert values == {
        "a": 12,
        "b": -7,
        "c": 31,
        "d": 15,
        "e": 0,
        "f": 1.5,
        "g": -0.25,
        "h": 1000.0,
        "i": 0.025,
        "j": 3.0,
        "k": 1.0,
        "l": math.inf,
        "m": -math.inf,
        "n": values["n"],
        "o": -math.inf,
        "p": -4,
    }
    assert math.isnan(values["n"])
    assert all(type(values[k]) is int for k in "abcdep")
    assert all(type(values[k]) is float for k in "fghijk")


def test_bools_and_identifiers():
    msg = parse('a: true b: False c: BILINEAR d: "BILINEAR"')
    assert one(msg, "a") is True and one(msg, "b") is False
    assert isinstance(one(msg, "c"), Identifier) and one(msg, "c") == "BILINEAR"
    assert type(one(msg, "d")) is str


def test_extension_and_any_field_names():
    msg = parse("[pkg.ext] { a: 1 } [type.googleapis.com/pkg.Type] { b: 2 }")
    assert msg == {"[pkg.ext]": [{"a": [1]}], "[type.googleapis.com/pkg.Type]": [{"b": [2]}]}


def test_positions():
    msg = parse('a: 1\n  b {\n    c: "x"\n  }\na: 2\n', source="cfg.txt")
    assert msg.where() == "cfg.txt:1:1"
    assert msg.where("a") == "cfg.txt:1:4"
    assert msg.where("a", 1) == "cfg.txt:5:4"
    # A message value is located at its field name; the message itself at its brace.
    assert msg.where("b") == "cfg.txt:2:3"
    inner = msg["b"][0]
    assert inner.where() == "cfg.txt:2:5"
    assert inner.where("c") == "cfg.txt:3:8"
    # An absent field points at its message.
    assert inner.where("missing") == "cfg.txt:2:5"


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("a: 08", r"^t:1:4: invalid octal number '08'$"),
        ("a: 1x", r"^t:1:4: invalid number '1x'$"),
        ("a: 1.2.3", r"^t:1:4: invalid number '1.2.3'$"),
        ("\n\na { b: 1", r"^t:3:9: expected '}' to close the message opened at line 3, column 3"),
        ("a < b: 1 }", r"^t:1:10: expected a field name, found '}'$"),
        ("a 1", r"^t:1:3: expected ':' or '\{' after field name 'a', found '1'$"),
        ('a: "abc\n"', r"^t:1:4: unterminated string$"),
        ("a: [1, {b: 1}]", r"^t:1:8: field 'a': a list cannot mix messages and values$"),
        ("a [1]", r"^t:1:4: field 'a': a list without ':' must hold messages"),
        ("a: [1 2]", r"^t:1:7: expected ',' or '\]' in the list of 'a', found '2'$"),
        ("a: [1,", r"^t:1:7: expected a value, found end of file$"),
        (r'a: "\q"', r"^t:1:4: unknown escape sequence '\\\\q'$"),
        (r'a: "\777"', r"^t:1:4: octal escape \\777 is out of range$"),
        ("a: -x", r"^t:1:5: expected a number after '-', found 'x'$"),
        ("a: @", r"^t:1:4: unexpected character '@'$"),
        ("a:", r"^t:1:3: expected a value, found end of file$"),
        ("a: }", r"^t:1:4: expected a value, found '}'$"),
        ("}", r"^t:1:1: expected a field name, found '}'$"),
        ("[] {}", r"^t:1:2: invalid extension name near '\]'$"),
        ("[a.] {}", r"^t:1:4: invalid extension name near '\]'$"),
        ("[a b] {}", r"^t:1:4: invalid extension name near 'b'$"),
    ],
)
def test_syntax_errors(text, pattern):
    with pytest.raises(TextFormatError, match=pattern) as info:
        parse(text, source="t")
    assert info.value.source == "t"


def test_error_line_and_column_attributes():
    with pytest.raises(TextFormatError) as info:
        parse("a: 1\nb: 2\n  c: ?", source="f")
    assert (info.value.line, info.value.column) == (3, 6)


def test_one_and_many():
    msg = parse('x: 1 x: 2 y: "s" z: 3 m { }', source="s")
    assert textproto.many(msg, "x") == [1, 2]
    assert textproto.many(msg, "absent") == []
    assert one(msg, "absent", None) is None
    assert one(msg, "z", kind=float) == 3.0 and type(one(msg, "z", kind=float)) is float
    assert one(msg, "m", kind=Message) == {}
    with pytest.raises(TextFormatError, match=r"^s:1:9: field 'x' is set 2 times"):
        one(msg, "x")
    with pytest.raises(TextFormatError, match=r"^s:1:1: missing field 'absent'$"):
        one(msg, "absent")
    with pytest.raises(TextFormatError, match=r"^s:1:14: field 'y' must be an integer, got 's'"):
        one(msg, "y", kind=int)
    with pytest.raises(TextFormatError, match=r"field 'x' must be a quoted string, got 1"):
        textproto.many(msg, "x", str)


def test_kinds_are_strict():
    msg = parse("b: true i: 1 f: 1.5 e: NAME")
    with pytest.raises(TextFormatError, match="must be an integer, got True"):
        one(msg, "b", kind=int)
    with pytest.raises(TextFormatError, match="must be true or false, got 1"):
        one(msg, "i", kind=bool)
    with pytest.raises(TextFormatError, match=r"must be an integer, got 1\.5"):
        one(msg, "f", kind=int)
    with pytest.raises(TextFormatError, match="must be a quoted string, got 'NAME'"):
        one(msg, "e", kind=str)


def test_expect_fields():
    msg = parse("batch_size: 1 shufle: true", source="c")
    with pytest.raises(TextFormatError, match=r"^c:1:23: unknown field 'shufle' in reader; did"):
        textproto.expect_fields(msg, ["batch_size", "shuffle"], "reader")
    with pytest.raises(
        TextFormatError, match=r"unknown field 'shufle' in r \(known: a, b, batch_size\)"
    ):
        textproto.expect_fields(msg, ["a", "b", "batch_size"], "r")
    textproto.expect_fields(msg, ["batch_size", "shufle", "other"], "reader")


def test_parse_file(tmp_path):
    path = tmp_path / "x.pbtxt"
    path.write_text("a { b: 'é' }\n", encoding="utf-8")
    msg = textproto.parse_file(path)
    assert msg == {"a": [{"b": ["é"]}]}
    assert msg["a"][0].where("b") == f"{path}:1:8"


# Round trip: any nested message written in any of the accepted spellings parses back.
_names = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
_scalars = st.one_of(
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.booleans(),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=8),
)


def _messages(depth):
    values = st.lists(_scalars, min_size=1, max_size=3)
    if depth > 0:
        values = st.one_of(values, st.lists(_messages(depth - 1), min_size=1, max_size=2))
    return st.dictionaries(_names, values, max_size=4)


def _quote(text):
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\r", "\\r") + '"'


def _scalar_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    return repr(value)


def _write(message, style):
    parts = []
    for name, values in message.items():
        if isinstance(values[0], dict):
            open_, close = ("<", ">") if style % 2 else ("{", "}")
            if style % 3 == 0:
                items = ", ".join(open_ + _write(v, style + 1) + close for v in values)
                parts.append(f"{name}: [{items}]")
            else:
                colon = ":" if style % 4 == 1 else ""
                parts += [f"{name}{colon} {open_}{_write(v, style + 1)}{close}" for v in values]
        elif style % 2 and len(values) > 1:
            parts.append(f"{name}: [{', '.join(_scalar_text(v) for v in values)}]")
        else:
            parts += [f"{name}: {_scalar_text(v)}" for v in values]
    separator = [" ", "\n", ", ", "; # comment\n"][style % 4]
    return separator.join(parts)


@given(message=_messages(2), style=st.integers(0, 11))
def test_round_trip(message, style):
    assert parse(_write(message, style)) == message
