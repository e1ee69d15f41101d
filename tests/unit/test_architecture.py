"""The architecture is enforced, not hoped for: the import-layer contracts in pyproject.toml hold,
they fail on a deliberate violation, and importing the runtime imports neither HF nor pillow."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "gemma4_static"
LAYERS = "layers: "
RUNTIME_WITHOUT_HF = "HF-free runtime: "
QUANT_REFERENCE = "The quantization reference imports none of the fake quantization"
EXECUTORCH_ROOMS = "executorch rooms: "
COMMANDS_ROOMS = "commands rooms: "
EXECUTORCH_IN_ONE_ROOM = "ExecuTorch in one room: "
CONTRACTS = 6


def _lint_imports(python_path: Path) -> subprocess.CompletedProcess[str]:
    linter = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert linter is not None, "import-linter is part of the test extras"
    return subprocess.run(
        [linter, "--no-cache", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(python_path), "COLUMNS": "250"},  # one line per contract
        cwd=python_path,
    )


def test_import_contracts_hold():
    result = _lint_imports(ROOT / "src")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{CONTRACTS} kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "violation", "contract"),
    [
        ("cpu/masks.py", "import transformers.masking_utils", RUNTIME_WITHOUT_HF),
        ("npu/embedding.py", "import PIL", RUNTIME_WITHOUT_HF),
        ("npu/decoder.py", "from ..stack import LayerStack", LAYERS),
        ("cpu/cache.py", "from ..npu.ops import rms_norm", LAYERS),
        ("spec/model.py", "from ..stack import LayerStack", LAYERS),
        ("executorch/lowering.py", "from ..ports.prompt import Prompt", LAYERS),
        ("runtime.py", "from .ports.prompt import Prompt", LAYERS),
        ("runtime.py", "import executorch.exir", EXECUTORCH_IN_ONE_ROOM),
        ("oracle/flow/verify.py", "from executorch.runtime import Runtime", EXECUTORCH_IN_ONE_ROOM),
        ("executorch/lowering.py", "from .stage_programs import EdgeStage", EXECUTORCH_ROOMS),
        ("executorch/program_cache.py", "from .lowering import lower", EXECUTORCH_ROOMS),
        ("commands/output.py", "from .verify import run_verify", COMMANDS_ROOMS),
        ("oracle/numerics/reference_quant.py", "from ...quant.fake_quant import signed_range", QUANT_REFERENCE),
    ],
)
def test_contracts_fail_on_a_deliberate_violation(tmp_path, module, violation, contract):
    """A copy of the package with one forbidden import added breaks exactly that contract."""
    copy = tmp_path / "gemma4_static"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{violation}  # deliberate violation\n")
    result = _lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    assert f"{CONTRACTS - 1} kept, 1 broken" in result.stdout
    broken = [line for line in result.stdout.splitlines() if line.endswith("BROKEN")]
    assert len(broken) == 1 and broken[0].startswith(contract), result.stdout


def test_importing_the_runtime_imports_neither_hf_nor_pillow():
    probe = (
        "import sys, gemma4_static, gemma4_static.runtime, gemma4_static.export; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'transformers', 'PIL'}))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_modules_stay_small():
    """One job per module: none grows past 250 lines."""
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text().splitlines()) for path in PACKAGE.rglob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > 250} == {}


@pytest.mark.filterwarnings("ignore:A test tried to use socket.socket")
def test_the_suite_runs_without_a_network():
    """pytest-socket (``--disable-socket`` in the pytest options) makes any socket an error, so a
    hidden download fails the run instead of being trusted to HF_HUB_OFFLINE."""
    import socket

    from pytest_socket import SocketBlockedError

    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def test_the_architecture_page_names_every_room_and_module():
    """The architecture page's tree is the folder tree: every package and module of
    ``src/gemma4_static`` is named in it (so a new room or module comes with its line)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    tree = page[page.index("```\nsrc/gemma4_static/") : page.index("\n```", page.index("src/gemma4_static/"))]
    words = set(re.findall(r"[\w.]+", tree))
    names = {
        path.stem if path.suffix == ".py" else path.name
        for path in PACKAGE.rglob("*")
        if "__pycache__" not in path.parts
        and not path.name.startswith("__")
        and (path.is_dir() or path.suffix in (".py", ".json"))
    }
    missing = {name for name in names if name not in words and f"{name}.py" not in words and f"{name}/" not in tree}
    assert missing == set(), f"modules the architecture page's tree does not name: {sorted(missing)}"
