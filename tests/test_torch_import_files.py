"""`.pt2` files are read without running code from them, and malformed ones are
one clear error.

The hostile file is made in the test: a real `torch.export.save` archive whose sample
inputs pickle is replaced by one carrying a payload that writes a marker file when
unpickled (`pathlib.Path.write_text`). torch's own loader would run it (it falls back to
full pickle when the safe loader rejects the sample inputs); ours must refuse before it
runs, name the trust flag, and run it only when trusted.
"""

from __future__ import annotations

import io
import pathlib
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.interop import ModelImportError, load_exported, load_model
from runtime.interop.pt2 import PickleRefused

torch = pytest.importorskip("torch", reason="the torch package is not installed")


class _Payload:
    """Unpickling this writes `marker` (a stand-in for any code a pickle can run)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (pathlib.Path.write_text, (pathlib.Path(self.marker), "pwned"))


def _model() -> Any:
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()).double().eval()
    return m, (torch.randn(2, 3, dtype=torch.float64),)


@pytest.fixture(scope="module")
def good(tmp_path_factory: Any) -> Path:
    m, args = _model()
    path = tmp_path_factory.mktemp("pt2") / "good.pt2"
    torch.export.save(torch.export.export(m, args), str(path))
    return path


def _hostile(good: Path, tmp: Path, marker: Path) -> Path:
    buf = io.BytesIO()
    torch.save(((torch.randn(2, 3, dtype=torch.float64), _Payload(marker)), {}), buf)
    bad = tmp / "bad.pt2"
    with zipfile.ZipFile(good) as z, zipfile.ZipFile(bad, "w") as out:
        names = [i.filename for i in z.infolist()]
        assert any(n.endswith("sample_inputs/model.pt") for n in names), names
        for info in z.infolist():
            data = z.read(info.filename)
            if info.filename.endswith("sample_inputs/model.pt"):
                data = buf.getvalue()
            out.writestr(info, data)
    return bad


def test_the_payload_really_runs_under_torchs_own_loader(good: Path, tmp_path: Path) -> None:
    """The crafted file is a real threat: plain torch.export.load executes it."""
    marker = tmp_path / "marker"
    try:  # torch may fail later on the odd sample inputs; the payload has run by then
        torch.export.load(str(_hostile(good, tmp_path, marker)))
    except Exception:
        pass
    assert marker.read_text() == "pwned"


@pytest.mark.parametrize("loader", ["load_exported", "load_model"])
def test_payload_refused_and_not_run(good: Path, tmp_path: Path, loader: str) -> None:
    marker = tmp_path / "marker"
    bad = _hostile(good, tmp_path, marker)
    load = {"load_exported": load_exported, "load_model": load_model}[loader]
    with pytest.raises(PickleRefused) as e:
        load(str(bad))
    assert not marker.exists()
    msg = str(e.value)
    assert "trust_pickle=True" in msg and "--trust-pickle" in msg and str(bad) in msg
    assert "arbitrary code" in msg and "\n" not in msg


def test_trusted_load_is_torchs(good: Path, tmp_path: Path) -> None:
    """trust_pickle=True is torch.export.load unchanged: the payload runs (that is the
    documented risk), and the program imports (its tensor input is still there)."""
    marker = tmp_path / "marker"
    bad = _hostile(good, tmp_path, marker)
    imp = load_exported(str(bad), trust_pickle=True)
    assert marker.exists() and imp.graph.num_inputs == 3


def test_good_file_loads_and_matches_torch(good: Path) -> None:
    imp = load_exported(str(good))
    ep = torch.export.load(str(good))
    (x,), _ = ep.example_inputs
    want = ep.module()(x).detach().numpy()
    np.testing.assert_allclose(imp.run()[0][0], want, rtol=1e-12)


def test_torch_load_restored_after_a_refusal(good: Path, tmp_path: Path) -> None:
    real = torch.load
    with pytest.raises(PickleRefused):
        load_exported(str(_hostile(good, tmp_path, tmp_path / "m")))
    assert torch.load is real


@pytest.mark.parametrize(
    "make, phrase",
    [
        (lambda g: b"", "empty"),
        (lambda g: g[: len(g) // 2], "truncated or corrupt"),
        (lambda g: b"PK\x03\x04" + b"\x00" * 40, "truncated or corrupt"),
        (lambda g: b"not a zip at all", "truncated or corrupt"),
    ],
)
def test_malformed_files_one_line(good: Path, tmp_path: Path, make: Any, phrase: str) -> None:
    p = tmp_path / "m.pt2"
    p.write_bytes(make(good.read_bytes()))
    with pytest.raises(ModelImportError) as e:
        load_exported(str(p))
    assert phrase in str(e.value) and "\n" not in str(e.value)


def test_not_a_regular_file(tmp_path: Path) -> None:
    d = tmp_path / "d.pt2"
    d.mkdir()
    with pytest.raises(ModelImportError, match="not a regular file"):
        load_exported(str(d))


def test_size_cap(good: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TORCHLEAN_PT2_MAX_BYTES", "100")
    with pytest.raises(ModelImportError, match="TORCHLEAN_PT2_MAX_BYTES"):
        load_exported(str(good))


def test_cli_refuses_the_payload(
    good: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m conformance MODEL.pt2` (its `main`, in this process: the payload would
    write the marker here too) exits 2 with one line naming the trust flag."""
    from conformance.__main__ import main

    marker = tmp_path / "marker"
    bad = _hostile(good, tmp_path, marker)
    rc = main([str(bad), "--max-examples", "1", "--report", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--trust-pickle" in lines[0], err
    assert "Traceback" not in err and not marker.exists()
    assert not (tmp_path / "r.json").exists()
