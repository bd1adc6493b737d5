"""The example notebooks run top to bottom and are stored without outputs."""

import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebooks_are_stored_without_outputs(path):
    cells = json.loads(path.read_text())["cells"]
    stored = [
        i
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "code" and (cell["outputs"] or cell["execution_count"] is not None)
    ]
    assert not stored, f"{path.name}: cells {stored} keep outputs; clear them before committing"


@pytest.mark.slow
def test_quickstart_notebook_runs(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="pip install '.[test]' brings nbformat")
    nbclient = pytest.importorskip("nbclient", reason="pip install '.[test]' brings nbclient")
    # The kernel is a child process: it finds object_input through PYTHONPATH, as from a checkout.
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "2")
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(ROOT / "examples/quickstart.ipynb", as_version=4)
    client = nbclient.NotebookClient(
        notebook, timeout=240, kernel_name="python3", resources={"metadata": {"path": tmp_path}}
    )
    client.execute()

    def text_of(cell):
        return "".join(
            out.get("text", "") for out in cell["outputs"] if out["output_type"] == "stream"
        )

    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert "boxes" in text_of(code[2]) and "masks" in text_of(code[2])
    assert any("image/png" in out.get("data", {}) for out in code[3]["outputs"]), "no grid shown"
    assert " images/s, " in text_of(code[4])
    assert "loss per epoch: [" in text_of(code[5])
