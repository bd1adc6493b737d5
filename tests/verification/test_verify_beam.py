"""``inspect --verify`` on Apache Beam's DirectRunner: the same verdicts and manifest as the
local run."""

import json

import pytest
from test_verify import _example, _truncated_jpeg_record, _write

from object_input import cli
from object_input.verification import manifest
from object_input.verification.verify import verify_files

pytest.importorskip("apache_beam")


@pytest.mark.slow
def test_verify_on_beam_writes_the_local_manifest(tmp_path, capsys):
    from object_input.verification.beam import verify_files_on_beam

    good = _write(tmp_path / "d.tfrecord", [_example(i) for i in range(3)])
    bad = _write(tmp_path / "e.tfrecord", [_example(9), _truncated_jpeg_record()])
    local = verify_files(str(tmp_path), masks="png")
    path = tmp_path / manifest.MANIFEST_NAME
    written = path.read_text()
    assert list(json.loads(written)["files"]) == ["d.tfrecord"]
    path.unlink()
    on_beam = verify_files_on_beam(str(tmp_path), masks="png", num_workers=2)
    assert on_beam == local
    assert [(v.file, v.records, v.num_bad) for v in on_beam.files] == [(good, 3, 0), (bad, 1, 1)]
    assert path.read_text() == written
    path.unlink()
    argv = ["inspect", "--verify", "--masks", "png", str(tmp_path), "--runner", "DirectRunner"]
    assert cli.main(argv) == 1
    assert capsys.readouterr().out == local.format() + "\n"
    assert path.read_text() == written
