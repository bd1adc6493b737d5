"""The ``object-input`` command line as a whole: help without TensorFlow, every command's flags
described, ``--verbose`` and ``--on-error`` alike everywhere, quiet start-up, flag values named by
their flag, one-line errors, the printed program name, ``python -m object_input.cli``."""

import argparse
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from object_input import cli
from object_input.cli._common import program
from object_input.writers import build_example, write_tfrecords

ROOT = pathlib.Path(__file__).resolve().parents[2]


HELP_SCRIPT = """
import contextlib, io, sys, time
start = time.perf_counter()
from object_input.cli import main
for argv in {argvs!r}:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            main(argv)
        except SystemExit as exit:
            assert exit.code == 0, (argv, exit.code)
    assert "usage: object-input" in out.getvalue() or argv == ["--version"], argv
print(time.perf_counter() - start, "tensorflow" in sys.modules)
"""


HELP_ARGVS = [
    ["--help"],
    ["--version"],
    *([name, "--help"] for name in ("demo", "convert", "inspect", "show", "bench")),
    *(["convert", name, "--help"] for name in ("coco", "voc", "csv", "folders")),
    ["serve", "--help"],
    *(["serve", role, "--help"] for role in ("dispatcher", "worker")),
]


def _run_python(*argv, env=None):
    """Run this Python with ``argv`` at the project root, without our TF_/GRPC_ settings."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "GRPC_"))}
    environment.update(env or {}, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        env=environment,
        cwd=ROOT,
        timeout=300,
    )


def test_help_does_not_load_tensorflow_and_is_fast():
    result = _run_python("-c", HELP_SCRIPT.format(argvs=HELP_ARGVS))
    assert result.returncode == 0, result.stderr
    seconds, loaded = result.stdout.split()
    assert loaded == "False"
    # Every help page together, imports included; TensorFlow alone takes seconds to load.
    assert float(seconds) < 1.0


def _parsers(parser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_command_and_option_has_a_description():
    parser = cli.build_parser()
    for sub in _parsers(parser):
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                assert all(choice.help for choice in action._choices_actions), sub.prog
            elif not isinstance(action, argparse._HelpAction):
                assert action.help, f"{sub.prog} {action.option_strings or action.dest}"


def test_every_command_takes_verbose_before_or_after_its_subcommand():
    parser = cli.build_parser()
    for sub in _parsers(parser):
        assert "--verbose" in sub._option_string_actions, sub.prog
    for argv in (
        ["serve", "--verbose", "dispatcher"],
        ["serve", "dispatcher", "-v"],
        ["convert", "--verbose", "folders", "root", "-o", "out"],
        ["-v", "serve", "worker", "--dispatcher", "host:5050"],
    ):
        assert parser.parse_args(argv).verbose is True, argv
    assert parser.parse_args(["serve", "dispatcher"]).verbose is False


def test_every_on_error_has_the_same_choices_in_one_order_and_states_its_default():
    from object_input.converters.write_options import WriteOptions
    from object_input.reliability.errors import ON_ERROR_POLICIES

    found = {
        sub.prog: sub._option_string_actions["--on-error"]
        for sub in _parsers(cli.build_parser())
        if "--on-error" in sub._option_string_actions
    }
    converters = [f"{cli.PROG} convert {name}" for name in ("coco", "voc", "csv", "folders")]
    assert sorted(found) == sorted([f"{cli.PROG} show", f"{cli.PROG} bench", *converters])
    for prog, action in found.items():
        assert tuple(action.choices) == ON_ERROR_POLICIES == ("raise", "skip"), prog
        # convert's flag left out is WriteOptions' default (with exit status 3 for holes).
        default = action.default or WriteOptions.on_error
        assert f"(default: {default}" in action.help, prog
    assert found[f"{cli.PROG} show"].default == "raise"
    assert WriteOptions.on_error == "skip"


@pytest.mark.slow
def test_tensorflow_start_up_lines_are_silenced(tmp_path):
    paths = write_tfrecords([build_example(np.zeros((4, 4, 3), np.uint8))], tmp_path / "x")
    code = "import sys; from object_input.cli import main; sys.exit(main(sys.argv[1:]))"
    result = _run_python("-c", code, "inspect", paths[0])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 file, 1 record, 0 corrupt")
    assert result.stderr == ""


@pytest.mark.slow
def test_verbose_shows_tensorflow_logs_and_no_buffer_size_of_ours(tmp_path):
    paths = write_tfrecords([build_example(np.zeros((4, 4, 3), np.uint8))], tmp_path / "x")
    code = "import sys; from object_input.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["bench", paths[0], "--steps", "1", "--warmup", "0", "--batch-size", "1"]
    result = _run_python(
        "-c", code, "--verbose", *argv, "--no-progress", env={"TF_CPP_MIN_LOG_LEVEL": "0"}
    )
    assert result.returncode == 0, result.stderr
    assert "images/s" in result.stdout
    # With --verbose TensorFlow's lines get through (it logs some on start-up), but none says a
    # buffer size was given: the readers leave TensorFlow its own.
    assert result.stderr
    assert "overridden by the user specified `buffer_size`" not in result.stderr


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "x", "--image-size", "0"], "argument --image-size: must be >= 1, got 0"),
        (["bench", "x", "--image-size", "64", "-1"], "argument --image-size: must be >= 1, got -1"),
        (["bench", "x", "--image-size", "big"], "argument --image-size: invalid integer value"),
        (["bench", "x", "--batch-size", "0"], "argument --batch-size: must be >= 1, got 0"),
        (["bench", "x", "--warmup", "-1"], "argument --warmup: must be >= 0, got -1"),
        (["show", "x", "-n", "0"], "argument -n/--num-examples: must be >= 1, got 0"),
        (["show", "x", "--columns", "0"], "argument --columns: must be >= 1, got 0"),
        (["show", "x", "--num-keypoints", "-2"], "argument --num-keypoints: must be >= 0, got -2"),
    ],
)
def test_a_bad_flag_value_is_named_by_its_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(argv)
    assert exit.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith(f"object-input {argv[0]}: error: {message}"), err
    assert "image_size" not in err and "batch_size" not in err


def test_printed_commands_run_without_an_activated_venv(tmp_path, monkeypatch):
    venv = tmp_path / "project" / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "object-input").write_text("#!/bin/sh\n")
    (venv / "object-input").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert program() == ".venv/bin/object-input"
    monkeypatch.chdir(tmp_path)
    assert program() == "project/.venv/bin/object-input"
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert program() == f"{tmp_path / 'python'} -m object_input.cli"
    monkeypatch.setenv("PATH", str(venv))
    assert program() == "object-input"


def test_python_dash_m_runs_the_command_line():
    """The fallback program() prints, and the command serve restarts its workers with."""
    from object_input import __version__

    result = _run_python("-m", "object_input.cli", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"object-input {__version__}\n"


def test_pipeline_errors_are_reported_with_our_message_first(tmp_path, capsys):
    from object_input.writers import encode_image

    data = encode_image(np.zeros((32, 32, 3), np.uint8), "jpeg")
    bad = build_example(data[: len(data) // 2], image_format="jpeg", height=32, width=32)
    good = build_example(np.zeros((32, 32, 3), np.uint8))
    (path,) = write_tfrecords([good, bad], tmp_path / "bad")
    argv = ["bench", path, "--steps", "3", "--warmup", "0", "--batch-size", "1", "--no-progress"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    # Shuffled and repeated: the bad record may come twice in a row, named twice then.
    assert re.match(
        rf"object-input bench: error: records? {re.escape(path)}:1\b.*: undecodable: ", err
    ), err
    assert "function_node" not in err and "[[" not in err


@pytest.mark.slow
def test_data_errors_of_show_and_bench_are_our_sentence_naming_the_label_map(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    example = build_example(
        np.zeros((8, 8, 3), np.uint8),
        boxes=[[0, 0, 0.5, 0.5], [0, 0, 1, 1], [0.1, 0.1, 0.2, 0.2]],
        classes=[],
        class_texts=["cat", "dgo", "cat"],
    )
    (path,) = write_tfrecords([example], tmp_path / "x")
    label_map = tmp_path / "label_map.pbtxt"
    label_map.write_text('item { id: 1 name: "cat" } item { id: 2 name: "dog" }')
    argv = ["show", path, "--label-map", str(label_map), "-o", str(tmp_path / "g.png")]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == (
        f"object-input show: error: record {path}:0: field image/object/class/text has names "
        'not in the label map: "dgo" (did you mean "dog"?); the label map has 2 names: "cat", '
        '"dog"\n'
    )
    config = tmp_path / "pipeline.config"
    config.write_text(
        "train_input_reader { max_number_of_boxes: 2 label_map_path: 'label_map.pbtxt' "
        f"tf_record_input_reader {{ input_path: '{path}' }} }}"
    )
    label_map.write_text('item { id: 1 name: "cat" } item { id: 2 name: "dgo" }')
    argv = ["bench", "--config", str(config), "--steps", "1", "--warmup", "0", "--no-progress"]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == (
        f"object-input bench: error: record {path}:0: has 3 boxes, more than max_boxes=2; raise "
        "max_boxes or pass box_overflow='truncate' to keep the first max_boxes and count the "
        "rest\n"
    )
