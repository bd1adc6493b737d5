"""A small, strict parser of protobuf text format (pipeline.config files, label maps).

Text format does not say which fields are repeated, so a parsed message maps every field name to
the *list* of its values, in file order; :func:`one` and :func:`many` read them back. Nested
messages are :class:`Message` objects (plain dicts with positions attached), so errors found
after parsing can still name the file, line and column.

Values: strings (adjacent literals concatenate; C escapes decoded; bytes that are not UTF-8 stay
``bytes``), ints (decimal, ``0x`` hex, ``0`` octal), floats (``1.5``, ``1e-3``, ``2f``, ``inf``,
``nan``), ``true``/``false`` as bool, and other identifiers (enum values) as :class:`Identifier`,
a ``str`` subclass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from object_input.suggest import did_you_mean

__all__ = [
    "Identifier",
    "Message",
    "TextFormatError",
    "expect_fields",
    "many",
    "one",
    "parse",
    "parse_file",
]


class TextFormatError(ValueError):
    """Malformed protobuf text, or a field with a wrong count or type; names file:line:column."""

    def __init__(self, message: str, source: str, line: int, column: int):
        super().__init__(f"{source}:{line}:{column}: {message}")
        self.source = source
        self.line = line
        self.column = column


class Identifier(str):
    """An unquoted identifier value (an enum value such as ``BILINEAR``)."""

    __slots__ = ()


class Message(dict):
    """A parsed message: field name → list of values. ``where()`` gives positions for errors."""

    def __init__(self, source: str, line: int, column: int):
        super().__init__()
        self.source = source
        self.line = line
        self.column = column
        self.positions: dict[str, list[tuple[int, int]]] = {}

    def where(self, name: str | None = None, index: int = 0) -> str:
        """``"source:line:column"`` of this message, or of value ``index`` of field ``name``.

        A message's own position is its opening brace; a field's message value is located at
        the field name (at the brace inside a ``[...]`` list), a scalar at the value.
        """
        line, column = self._position(name, index)
        return f"{self.source}:{line}:{column}"

    def error(self, message: str, name: str | None = None, index: int = 0) -> TextFormatError:
        """A :class:`TextFormatError` located at this message or at one of its values."""
        line, column = self._position(name, index)
        return TextFormatError(message, self.source, line, column)

    def _position(self, name: str | None, index: int) -> tuple[int, int]:
        positions = self.positions.get(name) if name is not None else None
        if not positions:
            return self.line, self.column
        return positions[min(index, len(positions) - 1)]

    def _add(self, name: str, value: Any, line: int, column: int) -> None:
        self.setdefault(name, []).append(value)
        self.positions.setdefault(name, []).append((line, column))


class _Token(NamedTuple):
    kind: str  # "string", "number", "ident", "punct" or "end"
    text: str
    line: int
    column: int


_SCANNER = re.compile(
    r"""
    (?P<space>[ \t\r\n\f\v]+|\#[^\n]*)
    |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
    |(?P<number>0[xX][0-9a-fA-F]+|(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?
        |[0-9]+(?:[eE][+-]?[0-9]+[fF]?|[fF])|[0-9]+)
    |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<punct>[{}<>\[\]:,;/.-])
    """,
    re.VERBOSE,
)

_SIMPLE_ESCAPES = {
    "a": b"\a",
    "b": b"\b",
    "f": b"\f",
    "n": b"\n",
    "r": b"\r",
    "t": b"\t",
    "v": b"\v",
    "\\": b"\\",
    "'": b"'",
    '"': b'"',
    "?": b"?",
}
_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))"
)
_NUMBER_TAIL = re.compile(r"[\w.]+")
_FLOAT_WORDS = {"inf": float("inf"), "infinity": float("inf"), "nan": float("nan")}
_BOOLS = {"true": True, "True": True, "false": False, "False": False}
_CLOSING = {"{": "}", "<": ">"}
# Deeper nesting is an error (no real config comes close), not a RecursionError.
MAX_DEPTH = 100
# Integers must fit protobuf's 64-bit fields: int64 from -2**63, uint64 up to 2**64 - 1.
_INT_RANGE = (-(2**63), 2**64 - 1)


def _tokenize(text: str, source: str) -> list[_Token]:
    tokens = []
    pos = 0
    line, line_start = 1, 0
    while pos < len(text):
        match = _SCANNER.match(text, pos)
        column = pos - line_start + 1
        if match is None:
            char = text[pos]
            if char in "\"'":
                raise TextFormatError("unterminated string", source, line, column)
            raise TextFormatError(f"unexpected character {char!r}", source, line, column)
        kind = match.lastgroup
        value = match.group()
        if kind == "number" and _NUMBER_TAIL.match(text, match.end()):
            bad = _NUMBER_TAIL.match(text, pos).group()
            raise TextFormatError(f"invalid number {bad!r}", source, line, column)
        if kind != "space":
            tokens.append(_Token(kind, value, line, column))
        newlines = value.count("\n")
        if newlines:
            line += newlines
            line_start = pos + value.rindex("\n") + 1
        pos = match.end()
    tokens.append(_Token("end", "", line, len(text) - line_start + 1))
    return tokens


class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.tokens = _tokenize(text, source)
        self.index = 0
        self.depth = 0

    def peek(self) -> _Token:
        return self.tokens[self.index]

    def take(self) -> _Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def accept(self, text: str) -> bool:
        token = self.peek()
        if token.kind == "punct" and token.text == text:
            self.index += 1
            return True
        return False

    def fail(self, message: str, token: _Token | None = None) -> TextFormatError:
        token = token or self.peek()
        return TextFormatError(message, self.source, token.line, token.column)

    def expect(self, text: str, what: str) -> None:
        if not self.accept(text):
            raise self.fail(f"expected {text!r} {what}, found {_describe(self.peek())}")

    def message(self, start: _Token, closing: str | None) -> Message:
        if self.depth >= MAX_DEPTH:
            raise self.fail(f"messages nested deeper than {MAX_DEPTH} levels", start)
        self.depth += 1
        try:
            return self._message_body(start, closing)
        finally:
            self.depth -= 1

    def _message_body(self, start: _Token, closing: str | None) -> Message:
        msg = Message(self.source, start.line, start.column)
        while True:
            token = self.peek()
            if token.kind == "end":
                if closing is None:
                    return msg
                raise self.fail(
                    f"expected {closing!r} to close the message opened at "
                    f"line {start.line}, column {start.column}, found end of file"
                )
            if closing is not None and token.kind == "punct" and token.text == closing:
                self.take()
                return msg
            self.field(msg)
            if not self.accept(","):
                self.accept(";")

    def field_name(self) -> str:
        token = self.take()
        if token.kind == "ident":
            return token.text
        if token.kind == "punct" and token.text == "[":
            # Extension or Any type URL: [pkg.ext] or [type.googleapis.com/pkg.Type].
            parts = []
            while True:
                part = self.take()
                if part.kind != "ident":
                    raise self.fail(f"invalid extension name near {_describe(part)}", part)
                parts.append(part.text)
                if self.accept("]"):
                    return "[" + "".join(parts) + "]"
                separator = self.take()
                if separator.kind != "punct" or separator.text not in (".", "/"):
                    raise self.fail(
                        f"invalid extension name near {_describe(separator)}", separator
                    )
                parts.append(separator.text)
        raise self.fail(f"expected a field name, found {_describe(token)}", token)

    def field(self, msg: Message) -> None:
        start = self.peek()
        name = self.field_name()
        colon = self.accept(":")
        token = self.peek()
        if token.kind == "punct" and token.text in _CLOSING:
            self.take()
            # A message value is located at its field name, a scalar at the value itself.
            msg._add(name, self.message(token, _CLOSING[token.text]), start.line, start.column)
        elif token.kind == "punct" and token.text == "[":
            self.take()
            self.list(msg, name, messages_only=not colon)
        elif colon:
            value, line, column = self.scalar()
            msg._add(name, value, line, column)
        else:
            raise self.fail(
                f"expected ':' or '{{' after field name {name!r}, found {_describe(token)}"
            )

    def list(self, msg: Message, name: str, messages_only: bool) -> None:
        kinds = set()
        if self.accept("]"):
            msg.setdefault(name, [])
            msg.positions.setdefault(name, [])
            return
        while True:
            token = self.peek()
            if token.kind == "punct" and token.text in _CLOSING:
                self.take()
                msg._add(name, self.message(token, _CLOSING[token.text]), token.line, token.column)
                kinds.add("message")
            elif messages_only:
                raise self.fail(
                    f"field {name!r}: a list without ':' must hold messages, "
                    f"found {_describe(token)}"
                )
            else:
                value, line, column = self.scalar()
                msg._add(name, value, line, column)
                kinds.add("scalar")
            if len(kinds) > 1:
                raise self.fail(f"field {name!r}: a list cannot mix messages and values", token)
            if self.accept("]"):
                return
            self.expect(",", f"or ']' in the list of {name!r}")

    def scalar(self) -> tuple[Any, int, int]:
        token = self.take()
        if token.kind == "punct" and token.text == "-":
            number = self.take()
            if number.kind == "number":
                return (
                    _in_range(-_number(number, self.source), token, self.source),
                    token.line,
                    token.column,
                )
            if number.kind == "ident" and number.text.lower() in _FLOAT_WORDS:
                return -_FLOAT_WORDS[number.text.lower()], token.line, token.column
            raise self.fail(f"expected a number after '-', found {_describe(number)}", number)
        if token.kind == "number":
            return (
                _in_range(_number(token, self.source), token, self.source),
                token.line,
                token.column,
            )
        if token.kind == "string":
            parts = [_unescape(token, self.source)]
            while self.peek().kind == "string":
                parts.append(_unescape(self.take(), self.source))
            data = b"".join(parts)
            try:
                return data.decode("utf-8"), token.line, token.column
            except UnicodeDecodeError:
                return data, token.line, token.column
        if token.kind == "ident":
            if token.text in _BOOLS:
                return _BOOLS[token.text], token.line, token.column
            if token.text.lower() in _FLOAT_WORDS:
                return _FLOAT_WORDS[token.text.lower()], token.line, token.column
            return Identifier(token.text), token.line, token.column
        raise self.fail(f"expected a value, found {_describe(token)}", token)


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "end of file"
    return repr(token.text)


def _in_range(value: int | float, token: _Token, source: str) -> int | float:
    if isinstance(value, int) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        raise TextFormatError(
            f"integer {token.text[:20]}{'...' if len(token.text) > 20 else ''} is outside the "
            "64-bit range",
            source,
            token.line,
            token.column,
        )
    return value


def _number(token: _Token, source: str) -> int | float:
    text = token.text
    if len(text) > 100 and re.fullmatch(r"(0[xX])?[0-9a-fA-F]+", text):
        # Longer than any 64-bit integer: do not even convert it.
        raise TextFormatError(
            f"integer {text[:20]}... ({len(text)} digits) is outside the 64-bit range",
            source,
            token.line,
            token.column,
        )
    if text[:2] in ("0x", "0X"):
        return int(text, 16)
    if re.fullmatch(r"[0-9]+", text):
        if len(text) > 1 and text[0] == "0":
            if not re.fullmatch(r"[0-7]+", text):
                raise TextFormatError(
                    f"invalid octal number {text!r}", source, token.line, token.column
                )
            return int(text, 8)
        return int(text)
    return float(text.rstrip("fF"))


def _unescape(token: _Token, source: str) -> bytes:
    body = token.text[1:-1]
    out = bytearray()
    pos = 0
    for match in _ESCAPE.finditer(body):
        out += body[pos : match.start()].encode("utf-8")
        octal, hex2, hex4, hex8, other = match.groups()
        if octal is not None:
            value = int(octal, 8)
            if value > 255:
                raise TextFormatError(
                    f"octal escape \\{octal} is out of range", source, token.line, token.column
                )
            out.append(value)
        elif hex2 is not None:
            out.append(int(hex2, 16))
        elif hex4 is not None or hex8 is not None:
            code = int(hex4 or hex8, 16)
            if code > 0x10FFFF:
                raise TextFormatError(
                    f"unicode escape {match.group()!r} is out of range",
                    source,
                    token.line,
                    token.column,
                )
            out += chr(code).encode("utf-8", "surrogatepass")
        elif other in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[other]
        else:
            raise TextFormatError(
                f"unknown escape sequence {match.group()!r}", source, token.line, token.column
            )
        pos = match.end()
    out += body[pos:].encode("utf-8")
    return bytes(out)


def parse(text: str, source: str = "<string>") -> Message:
    """Parse protobuf text into a :class:`Message`; ``source`` names the text in errors."""
    parser = _Parser(text, source)
    return parser.message(_Token("punct", "", 1, 1), None)


def parse_file(path: str | os.PathLike) -> Message:
    """Parse the protobuf text file at ``path`` (UTF-8; other bytes are a located error)."""
    with open(path, "rb") as f:
        data = f.read()
    return parse(decode_text(data, os.fspath(path)), os.fspath(path))


def decode_text(data: bytes, source: str) -> str:
    """``data`` as UTF-8 text, or a :class:`TextFormatError` at the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise TextFormatError(
            f"byte 0x{data[err.start]:02x} is not UTF-8 text (is this a binary file?)",
            source,
            line,
            column,
        ) from None


_REQUIRED = object()

_KIND_NAMES = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a quoted string",
    Message: "a message { ... }",
}


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is str:
        # An unquoted identifier is an enum value, not a string (as in protobuf itself).
        return isinstance(value, str) and not isinstance(value, Identifier)
    return isinstance(value, kind)


def many(msg: Message, name: str, kind: type | None = None) -> list[Any]:
    """All values of field ``name`` (empty when absent), each checked to be of ``kind``."""
    values = list(msg.get(name, []))
    if kind is not None:
        for index, value in enumerate(values):
            if not _is_kind(value, kind):
                raise msg.error(
                    f"field {name!r} must be {_KIND_NAMES.get(kind, kind.__name__)}, got {value!r}",
                    name,
                    index,
                )
        if kind is float:
            values = [float(v) for v in values]
    return values


def one(msg: Message, name: str, default: Any = _REQUIRED, kind: type | None = None) -> Any:
    """The single value of field ``name``: ``default`` when absent; an error when repeated.

    Without ``default`` the field is required. ``kind`` (int, float, bool, str or Message)
    checks the value's type; ints are accepted where floats are.
    """
    values = many(msg, name, kind)
    if len(values) > 1:
        raise msg.error(f"field {name!r} is set {len(values)} times; it takes one value", name, 1)
    if values:
        return values[0]
    if default is _REQUIRED:
        raise msg.error(f"missing field {name!r}")
    return default


def expect_fields(msg: Message, known: Iterable[str], what: str) -> None:
    """Raise for the first field of ``msg`` not in ``known``, suggesting the closest names."""
    known = sorted(set(known))
    for name in msg:
        if name in known:
            continue
        hint = did_you_mean(name, known) or f" (known: {', '.join(known)})"
        raise msg.error(f"unknown field {name!r} in {what}{hint}", name)
