"""The ``object-input`` command line: help without TensorFlow, quiet start-up, demo and the README
commands, convert, show's mask and keypoint detection, bench."""

import argparse
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

import numpy as np
import pytest

from object_input import cli, fields, viz
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


def _run_python(code, *args, env=None):
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "GRPC_"))}
    environment.update(env or {}, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=ROOT,
        timeout=300,
    )


def test_help_does_not_load_tensorflow_and_is_fast():
    result = _run_python(HELP_SCRIPT.format(argvs=HELP_ARGVS))
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


def test_tensorflow_start_up_lines_are_silenced(tmp_path):
    paths = write_tfrecords([build_example(np.zeros((4, 4, 3), np.uint8))], tmp_path / "x")
    code = "import sys; from object_input.cli import main; sys.exit(main(sys.argv[1:]))"
    result = _run_python(code, "inspect", paths[0])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("1 file, 1 record, 0 corrupt")
    assert result.stderr == ""


def test_verbose_shows_tensorflow_logs_and_no_buffer_size_of_ours(tmp_path):
    paths = write_tfrecords([build_example(np.zeros((4, 4, 3), np.uint8))], tmp_path / "x")
    code = "import sys; from object_input.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["bench", paths[0], "--steps", "1", "--warmup", "0", "--batch-size", "1"]
    result = _run_python(
        code, "--verbose", *argv, "--no-progress", env={"TF_CPP_MIN_LOG_LEVEL": "0"}
    )
    assert result.returncode == 0, result.stderr
    assert "images/s" in result.stdout
    # With --verbose TensorFlow's lines get through (it logs some on start-up), but none says a
    # buffer size was given: the readers leave TensorFlow its own.
    assert result.stderr
    assert "overridden by the user specified `buffer_size`" not in result.stderr


def _readme_commands():
    """``object-input`` command lines of the README's shell blocks, in order."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
        for line in block.splitlines():
            words = shlex.split(line.split("&&")[-1], comments=True)
            if words and words[0].endswith("object-input"):
                commands.append(words[1:])
    return commands


# Appended to the README's commands to keep the test small; argparse keeps the last value.
SMALL = {
    "demo": ["--num-examples", "12", "--num-shards", "2", "--epochs", "1", "--image-size", "32"],
    "show": ["-n", "2"],
    "bench": ["--steps", "2", "--warmup", "1", "--batch-size", "2", "--no-progress"],
    "inspect": [],
}


def test_demo_keeps_its_data_and_the_printed_and_readme_commands_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    readme = _readme_commands()
    demo = next(argv for argv in readme if argv[0] == "demo")
    assert cli.main([*demo, *SMALL["demo"]]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert sorted(os.listdir("data")) == [
        "label_map.pbtxt",
        "pipeline.config",
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
    ]
    printed = [shlex.split(line) for line in out[-2:]]
    assert [argv[1] for argv in printed] == ["inspect", "show"]
    assert {argv[0] for argv in printed} == {cli.program()}
    assert cli.main(printed[0][1:]) == 0
    assert capsys.readouterr().out.startswith("2 files, 12 records, 0 corrupt")
    assert cli.main([*printed[1][1:], *SMALL["show"]]) == 0
    assert os.path.isfile(printed[1][printed[1].index("-o") + 1])
    ran = set()
    for argv in readme:
        if argv[0] in ("inspect", "show", "bench"):
            assert cli.main([*argv, *SMALL[argv[0]]]) == 0, argv
            ran.add(argv[0])
    assert ran == {"inspect", "show", "bench"}


def test_convert_prints_what_it_wrote_and_the_next_command(tmp_path, capsys):
    import tensorflow as tf

    images = tmp_path / "images"
    images.mkdir()
    for name in ("a.png", "b.png"):
        (images / name).write_bytes(tf.io.encode_png(np.zeros((10, 20, 3), np.uint8)).numpy())
    table = tmp_path / "boxes.csv"
    table.write_text(
        "filename,width,height,class,xmin,ymin,xmax,ymax\n"
        "a.png,20,10,cat,0,0,5,5\nb.png,20,10,dog,1,1,4,4\na.png,20,10,dog,2,2,8,8\n"
    )
    out = tmp_path / "out" / "train"
    argv = ["convert", "csv", str(table), str(images), "-o", str(out), "--num-shards", "2"]
    assert cli.main([*argv, "--no-progress"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == (
        f"wrote 2 examples with 3 boxes to 2 shards {out}-*.tfrecord; "
        f"label map {tmp_path / 'out' / 'label_map.pbtxt'} (2 classes)"
    )
    assert lines[-1] == f"next: {cli.program()} inspect {shlex.quote(f'{out}-*.tfrecord')}"
    assert cli.main(shlex.split(lines[-1])[2:]) == 0
    capsys.readouterr()
    # Another shard count: the new shards replace the old ones under the prefix.
    assert cli.main([*argv, "--num-shards", "1", "--no-progress"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote 2 examples with 3 boxes to 1 shard {out}-00000-of-00001.tfrecord; "
        f"label map {tmp_path / 'out' / 'label_map.pbtxt'} (2 classes); removed 2 shards of the "
        f"earlier dataset under {out}: {out}-00000-of-00002.tfrecord … "
        f"{out}-00001-of-00002.tfrecord"
    )
    assert cli.main(["inspect", f"{out}-*"]) == 0
    assert capsys.readouterr().out.startswith("1 file, 2 records, 0 corrupt")
    assert (
        cli.main(["convert", "csv", str(tmp_path / "none.csv"), str(images), "-o", str(out)]) == 1
    )
    assert "object-input convert csv: error: cannot read" in capsys.readouterr().err


def test_convert_takes_verbose_before_or_after_the_format():
    def verbose(*argv):
        return cli.build_parser().parse_args(argv).verbose

    assert verbose("convert", "folders", "root", "-o", "out") is False
    assert verbose("convert", "--verbose", "folders", "root", "-o", "out") is True
    assert verbose("convert", "folders", "root", "-o", "out", "-v") is True
    assert verbose("-v", "convert", "folders", "root", "-o", "out") is True


def test_convert_flags_are_the_write_options_fields(tmp_path, capsys):
    from object_input.converters import WriteOptions

    def parsed(*flags):
        args = cli.build_parser().parse_args(["convert", "folders", "root", "-o", "out", *flags])
        return cli._write_options(args)

    assert parsed() == WriteOptions()
    flags = ["--num-shards", "3", "--label-map", "lm.pbtxt", "--label-map-output", "o.pbtxt"]
    flags += ["--workers", "2", "--no-shuffle", "--seed", "7", "--gzip", "--no-progress"]
    flags += ["--on-error", "raise", "--runner", "DirectRunner", "--beam-options=--x=1 --y=2"]
    assert parsed(*flags) == WriteOptions(
        num_shards=3,
        label_map="lm.pbtxt",
        label_map_output="o.pbtxt",
        num_workers=2,
        shuffle=False,
        seed=7,
        compression="GZIP",
        progress=False,
        on_error="raise",
        runner="DirectRunner",
        beam_options="--x=1 --y=2",
    )
    argv = ["convert", "folders", str(tmp_path), "-o", str(tmp_path / "t"), "--num-shards", "0"]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == (
        "object-input convert folders: error: num_shards must be an integer >= 1 or None, got 0\n"
    )


def test_show_draws_masks_and_keypoints_whenever_the_records_have_them(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    masks = np.zeros((2, 12, 16), np.uint8)
    masks[0, 2:6, 3:9] = masks[1, 5:11, 1:4] = 1
    example = build_example(
        rng.integers(0, 255, (12, 16, 3), dtype=np.uint8),
        boxes=[[2 / 12, 3 / 16, 6 / 12, 9 / 16], [5 / 12, 1 / 16, 11 / 12, 4 / 16]],
        classes=[1, 2],
        masks=masks,
        keypoints=np.full((2, 3, 2), 0.5),
        keypoint_visibilities=np.full((2, 3), 2),
    )
    paths = write_tfrecords([example], tmp_path / "kp")
    drawn = []
    monkeypatch.setattr(viz, "render_grid", lambda examples, path, *a: drawn.extend(examples))
    assert cli.main(["show", paths[0], "-o", str(tmp_path / "g.png"), "--no-augment"]) == 0
    (shown,) = drawn
    np.testing.assert_array_equal(shown[fields.MASKS], masks)
    assert shown[fields.KEYPOINTS].shape == (2, 3, 2)
    np.testing.assert_array_equal(shown[fields.KEYPOINTS], np.full((2, 3, 2), 0.5, np.float32))


def test_show_names_classes_by_the_label_map_beside_the_files(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from object_input.label_map import write_label_map

    example = build_example(
        np.zeros((8, 8, 3), np.uint8), boxes=[[0.1, 0.1, 0.5, 0.5]], classes=[90]
    )
    paths = write_tfrecords([example], tmp_path / "coco" / "val")
    write_label_map(tmp_path / "coco" / "label_map.pbtxt", {"person": 1, "toothbrush": 90})
    names = []
    monkeypatch.setattr(
        viz, "render_grid", lambda examples, path, classes, *a: names.append(classes)
    )
    argv = ["show", paths[0], "-o", str(tmp_path / "g.png"), "--no-augment"]
    assert cli.main(argv) == 0
    assert names == [{1: "person", 90: "toothbrush"}]
    assert cli.main([*argv, "--label-map", str(tmp_path / "coco" / "label_map.pbtxt")]) == 0
    assert names[-1] == {1: "person", 90: "toothbrush"}
    (tmp_path / "coco" / "label_map.pbtxt").unlink()
    assert cli.main(argv) == 0
    assert names[-1] is None


def test_bench_prints_images_per_second_and_cpu_time(synthetic_dir, tmp_path, capsys):
    argv = ["bench", str(synthetic_dir), "--steps", "3", "--warmup", "1", "--batch-size", "4"]
    assert cli.main([*argv, "--image-size", "32", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(
        r"[\d.]+ images/s, [\d.]+ CPU ms per image \(12 images in 3 batches of 4, [\d.]+ s "
        r"after 1 warm-up batch; \d+ CPUs?\)\n",
        out,
    ), out
    config = tmp_path / "aug.yaml"
    config.write_text(
        f"input_paths: [{synthetic_dir}/*.tfrecord]\nbatch_size: 2\n"
        "augment:\n  - random_horizontal_flip: {}\n"
    )
    assert cli.main(["bench", "--config", str(config), "--steps", "2", "--no-progress"]) == 0
    assert "(4 images in 2 batches of 2" in capsys.readouterr().out
    assert cli.main([*argv, "--image-size", "1", "2", "3"]) == 1
    assert capsys.readouterr().err == (
        "object-input bench: error: --image-size takes SIZE or HEIGHT WIDTH, got 1 2 3\n"
    )


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


def test_demo_again_leaves_no_stale_manifest_and_warnings_are_one_line(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--output", "data", *SMALL["demo"]]) == 0
    verify = ["inspect", "--verify", "data/train-*.tfrecord", "--config", "data/pipeline.config"]
    assert cli.main(verify) == 0
    assert os.path.exists("data/object_input_manifest.json")
    capsys.readouterr()
    assert cli.main(["demo", "--output", "data", *SMALL["demo"]]) == 0
    assert not os.path.exists("data/object_input_manifest.json")
    assert capsys.readouterr().err == ""
    assert cli.main(verify[:3]) == 0  # without the config: no masks
    capsys.readouterr()
    assert cli.main(["show", "--config", "data/pipeline.config", "-n", "1", "-o", "grid.png"]) == 0
    assert capsys.readouterr().err == (
        "object-input: warning: verified manifest not used, every record is checked: all 2 "
        "files: verified with masks=None, read with masks='png'; read them with "
        "the settings they were verified with, or verify them under these: object-input inspect "
        "--verify FILES with the same --label-map, --masks and --num-keypoints\n"
    )


def _readme_make_dataset_calls() -> list[str]:
    """The source of each ``oi.make_dataset(...)`` call of the README's python blocks."""
    import ast

    text = (ROOT / "README.md").read_text()
    calls = []
    for block in re.findall(r"^```python\n(.*?)^```", text, re.M | re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "oi.make_dataset":
                calls.append(ast.get_source_segment(block, node))
    return calls


@pytest.mark.slow
def test_readme_sequence_reads_verified_data_without_a_warning(tmp_path, monkeypatch, capsys):
    import warnings

    import object_input as oi
    from object_input.sources.tfrecord import TFRecord

    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    readme = _readme_commands()
    verify = next(argv for argv in readme if "--verify" in argv)
    assert verify == [
        "inspect", "--verify", "data/train-*.tfrecord", "--config", "data/pipeline.config"
    ]  # fmt: skip
    assert cli.main(["demo", "--output", "data", *SMALL["demo"]]) == 0
    assert cli.main(verify) == 0
    calls = _readme_make_dataset_calls()
    assert len(calls) == 2 and all('"data/train-*.tfrecord"' in call for call in calls)
    config = 'oi.make_dataset(config=oi.load_pipeline_config("data/pipeline.config"))'
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        first, _keras = (eval(call, {"oi": oi}) for call in calls)
        from_config = eval(config, {"oi": oi})
    # Verified, so read without checks: the datasets of finite epochs know their length.
    assert len(first) == len(from_config) == 2  # 12 records in batches of 8
    assert len(list(first)) == 2
    assert TFRecord("data/train-*.tfrecord").verified
    capsys.readouterr()
    for argv in (
        ["show", "--config", "data/pipeline.config"],
        ["show", "data/train-*.tfrecord", "--label-map", "data/label_map.pbtxt"],
        ["show", "data/train-*.tfrecord"],
    ):
        assert cli.main([*argv, "-n", "1", "-o", "grid.png"]) == 0, argv
        assert capsys.readouterr().err == "", argv
    with pytest.warns(UserWarning) as seen:
        oi.make_dataset("data/train-*.tfrecord", batch_size=8, num_keypoints=1)
    assert [str(w.message) for w in seen] == [
        "verified manifest not used, every record is checked: all 2 files: verified with "
        "num_keypoints=0, read with num_keypoints=1; read them with the settings they were "
        "verified with, or verify them under these: object-input inspect --verify FILES with "
        "the same --label-map, --masks and --num-keypoints"
    ]


@pytest.mark.slow
def test_demo_into_an_existing_folder_replaces_the_dataset_there(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["demo", "--output", "data", *SMALL["demo"]]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "wrote 12 synthetic examples to 2 TFRecord shards, a label map and a pipeline.config in "
        "data"
    )
    assert out[-4].startswith("1 epoch of 12 examples: 2 batches, 12 images in ")
    argv = ["demo", "--output", "data", *SMALL["demo"], "--num-shards", "3", "--epochs", "2"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "removed 2 shards of the earlier dataset under data/train: "
        "data/train-00000-of-00002.tfrecord … data/train-00001-of-00002.tfrecord"
    )
    assert out[-4].startswith("2 epochs of 12 examples: 3 batches, 24 images in ")
    assert sorted(os.listdir("data")) == [
        "label_map.pbtxt",
        "pipeline.config",
        "train-00000-of-00003.tfrecord",
        "train-00001-of-00003.tfrecord",
        "train-00002-of-00003.tfrecord",
    ]
    assert cli.main(["inspect", "data/train-*"]) == 0
    assert capsys.readouterr().out.startswith("3 files, 12 records, 0 corrupt")


def test_printed_commands_run_without_an_activated_venv(tmp_path, monkeypatch):
    venv = tmp_path / "project" / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "object-input").write_text("#!/bin/sh\n")
    (venv / "object-input").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    monkeypatch.chdir(tmp_path / "project")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert cli.program() == ".venv/bin/object-input"
    monkeypatch.chdir(tmp_path)
    assert cli.program() == "project/.venv/bin/object-input"
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert cli.program() == f"{tmp_path / 'python'} -m object_input.cli"
    monkeypatch.setenv("PATH", str(venv))
    assert cli.program() == "object-input"


def test_counts_of_one_are_singular(tmp_path, capsys):
    import tensorflow as tf

    from object_input.wording import count

    assert [count(1, "box"), count(0, "box"), count(2, "warm-up batch")] == [
        "1 box",
        "0 boxes",
        "2 warm-up batches",
    ]
    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(tf.io.encode_png(np.zeros((10, 20, 3), np.uint8)).numpy())
    table = tmp_path / "boxes.csv"
    table.write_text("filename,width,height,class,xmin,ymin,xmax,ymax\na.png,20,10,cat,0,0,5,5\n")
    out = tmp_path / "train"
    assert (
        cli.main(["convert", "csv", str(table), str(images), "-o", str(out), "--no-progress"]) == 0
    )
    assert capsys.readouterr().out.splitlines()[0] == (
        f"wrote 1 example with 1 box to 1 shard {out}-00000-of-00001.tfrecord; "
        f"label map {tmp_path / 'label_map.pbtxt'} (1 class)"
    )
    assert cli.main(["inspect", "--verify", f"{out}-*.tfrecord"]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "1 of 1 file verified",
        f"  {out}-00000-of-00001.tfrecord: 1 good record, verified",
    ]


@pytest.mark.parametrize("separator, flag", [(";", ";"), ("\t", "\\t")])
def test_convert_csv_names_the_separator_the_header_uses(tmp_path, capsys, separator, flag):
    import tensorflow as tf

    images = tmp_path / "images"
    images.mkdir()
    (images / "a.png").write_bytes(tf.io.encode_png(np.zeros((10, 20, 3), np.uint8)).numpy())
    table = tmp_path / "boxes.csv"
    table.write_text(
        "filename,width,height,class,xmin,ymin,xmax,ymax\na.png,20,10,cat,0,0,5,5\n".replace(
            ",", separator
        )
    )
    argv = ["convert", "csv", str(table), str(images), "-o", str(tmp_path / "t"), "--no-progress"]
    assert cli.main(argv) == 1
    assert capsys.readouterr().err.endswith(
        f"(in any order); the header looks {separator!r}-separated: pass "
        f"field_delim={separator!r} (convert csv: --field-delim {separator!r})\n"
    )
    assert cli.main([*argv, "--field-delim", flag]) == 0
    assert capsys.readouterr().out.startswith("wrote 1 example with 1 box to 1 shard")


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


def test_convert_folders_says_how_a_classifier_reads_it(tmp_path, capsys):
    import tensorflow as tf

    (tmp_path / "flowers" / "rose").mkdir(parents=True)
    image = tf.io.encode_png(np.zeros((4, 4, 3), np.uint8)).numpy()
    (tmp_path / "flowers" / "rose" / "a.png").write_bytes(image)
    out = tmp_path / "train"
    argv = ["convert", "folders", str(tmp_path / "flowers"), "-o", str(out), "--no-progress"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"wrote 1 example with image-level classes to 1 shard {out}-00000-of-00001.tfrecord; "
        f"label map {tmp_path / 'label_map.pbtxt'} (1 class)"
    )
    assert lines[-1] == (
        f"  make_dataset({str(out) + '-00000-of-00001.tfrecord'!r}, keras='classification') "
        "gives (images, labels) for a Keras classifier"
    )


def test_serve_worker_is_started_again_and_a_quickly_dying_one_is_given_up():
    from object_input.scale_out import service

    said = []
    status = service.supervise_worker(
        [sys.executable, "-c", "import sys; sys.exit(3)"], said.append, delay_s=0
    )
    assert status == 1
    restarts = ["worker exited with status 3; starting it again at the same address"]
    assert said == restarts * service.MAX_QUICK_RESTARTS + [
        f"worker exited with status 3 {service.MAX_QUICK_RESTARTS + 1} times in a row; giving up"
    ]


SUPERVISED = """
import sys
from object_input.scale_out import service
print("started", flush=True)
sys.exit(service.supervise_worker([sys.executable, "-c", "import time; time.sleep(120)"], print))
"""


def test_serve_worker_stops_cleanly_on_sigterm():
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISED],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert supervisor.stdout.readline() == "started\n"
        child = _wait_for_child(supervisor.pid)
        supervisor.terminate()
        assert supervisor.wait(timeout=30) == 0
        assert supervisor.stdout.read() == ""  # no restart
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)
    finally:
        supervisor.kill()


def _wait_for_child(pid, timeout=30.0):
    """The pid of ``pid``'s child process (Linux /proc), polled until it exists."""
    deadline = time.monotonic() + timeout
    path = pathlib.Path(f"/proc/{pid}/task/{pid}/children")
    while time.monotonic() < deadline:
        children = path.read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child in {timeout} s")


def test_serve_refuses_fault_tolerance_without_a_work_dir():
    from object_input.scale_out import service

    with pytest.raises(ValueError, match="needs a work_dir"):
        service.DispatcherSettings(fault_tolerant_mode=True)
    assert service.DispatcherSettings(work_dir="/tmp/x").fault_tolerant
    assert (
        not service.DispatcherSettings(work_dir="/tmp/x", fault_tolerant_mode=False)
        .config()
        .fault_tolerant_mode
    )
