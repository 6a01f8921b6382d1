"""Every notebook in notebooks/ runs top to bottom in the venv's interpreter."""
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def venv_kernel(tmp_path_factory, monkeypatch_module):
    """A Jupyter kernelspec for this interpreter, on JUPYTER_PATH, so notebooks see the installed prenet."""
    from ipykernel.kernelspec import write_kernel_spec

    folder = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(str(folder / "kernels" / "prenet-venv"), overrides={"argv": [
        sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]})
    monkeypatch_module.setenv("JUPYTER_PATH", str(folder))
    # Notebooks run outside the tree: point them at the data sets this process finds.
    from prenet.datasets import neusight_folder

    monkeypatch_module.setenv("PRENET_CPU_DATA", str(ROOT / "data" / "cpu"))
    monkeypatch_module.setenv("PRENET_NEUSIGHT", str(neusight_folder()))
    return "prenet-venv"


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, venv_kernel, tmp_path):
    notebook = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(tmp_path)}}
    NotebookClient(notebook, kernel_name=venv_kernel, timeout=600, resources=resources).execute()
    errors = [o for cell in notebook.cells for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
