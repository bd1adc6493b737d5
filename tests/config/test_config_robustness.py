"""Malformed config files: always a located ConfigError, never another exception type."""

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from object_input import cli, load_pipeline_config
from object_input.label_map import LabelMapError, load_label_map
from object_input.ops import ConfigError

DEEP = 5000

CASES = {
    "nesting.config": (
        "train_config { " + "a { " * DEEP + "} " * DEEP + "}",
        "nesting.config:1:",
        "nested deeper than 100 levels",
    ),
    "nesting.yaml": ("augment: " + "[" * DEEP + "]" * DEEP, "line 1, column", "deeper than 100"),
    "digits.config": (
        "train_config { batch_size: " + "9" * 5000 + " }",
        "digits.config:1:28",
        "5000 digits) is outside the 64-bit range",
    ),
    "big.config": (
        "train_config {\n  batch_size: -99999999999999999999\n}",
        "big.config:2:15",
        "outside the 64-bit range",
    ),
    "digits.yaml": ("batch_size: " + "9" * 5000, "line 1, column 13", "64-bit range"),
    "binary.config": (
        b"train_config {\n  \xff\xfe\x00 }",
        "binary.config:2:3",
        "0xff is not UTF-8",
    ),
    "binary.yaml": (b"batch_size: 2\n\x89PNG\x00", "binary.yaml:2:1", "0x89 is not UTF-8"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_config_is_a_located_config_error(tmp_path, name):
    text, where, what = CASES[name]
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_pipeline_config(str(path))
    message = str(err.value)
    assert where in message and what in message, message


@pytest.mark.parametrize("name", ["nesting.config", "binary.yaml"])
def test_cli_prints_one_line_and_fails(tmp_path, capsys, name):
    text, _, what = CASES[name]
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert cli.main(["show", str(tmp_path), "--config", str(path), "-o", "x.png"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("object-input show: error:") and what in err


def test_label_map_with_binary_bytes_is_a_label_map_error(tmp_path):
    path = tmp_path / "map.pbtxt"
    path.write_bytes(b'item { id: 1 name: "\xff" }')
    with pytest.raises(LabelMapError, match=r"map\.pbtxt:1:21"):
        load_label_map(str(path))


def test_yaml_tags_never_run_code(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("batch_size: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_pipeline_config(str(path))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.binary(max_size=200) | st.text(alphabet="{}[]<>:;,-#'\"\\ \nabz09._xe", max_size=80))
@pytest.mark.parametrize("suffix", [".config", ".yaml"])
def test_fuzzed_config_gives_config_error_or_a_config(tmp_path, suffix, data):
    path = tmp_path / f"fuzz{suffix}"
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    with contextlib.suppress(ConfigError):
        load_pipeline_config(str(path))
