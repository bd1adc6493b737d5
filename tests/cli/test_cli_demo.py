"""``object-input demo``: it keeps its data when asked, replaces an earlier dataset, and the
commands it prints and the README's run after it."""

import os
import pathlib
import re
import shlex

import pytest

from object_input import cli
from object_input.cli._common import program

ROOT = pathlib.Path(__file__).resolve().parents[2]


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


@pytest.mark.slow
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
    assert {argv[0] for argv in printed} == {program()}
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


@pytest.mark.slow
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
    # Verified, so read without checks (and without a warning, above).
    assert len(list(first)) == len(list(from_config)) == 2  # 12 records in batches of 8
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
