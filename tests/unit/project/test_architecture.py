"""The architecture is enforced, not hoped for: the import-layer contracts in pyproject.toml hold,
they fail on a deliberate violation, importing the runtime imports neither HF nor pillow, and the
package's public names are loaded from their modules on first use."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.package_copy import package_copy
from tests.paths import PACKAGE, ROOT

LAYERS = "layers: "
RUNTIME_WITHOUT_HF = "HF-free runtime: "
QUANT_REFERENCE = "The quantization reference imports none of the fake quantization"
EXECUTORCH_ROOMS = "executorch rooms: "
COMMANDS_ROOMS = "commands rooms: "
EXECUTORCH_IN_ONE_ROOM = "ExecuTorch in one room: "
ORACLE_ROOMS = "oracle rooms: "
PORTS_ROOMS = "ports rooms: "
ADAPTERS_ROOMS = "adapters: "
CONTRACTS = 9


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


# (module, the import added to it, the contract it breaks): every contract, each rule kind of a layers contract
VIOLATIONS = [
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
    ("bundle.py", "from .ports import Gemma4Port", LAYERS),
    # an import under TYPE_CHECKING is an arrow too
    ("executorch/lowering.py", "import typing\nif typing.TYPE_CHECKING:\n    from ..runtime import X", LAYERS),
    ("oracle/groups/rope.py", "from ..flow.verify import verify", ORACLE_ROOMS),
    ("oracle/episodes/cases.py", "from ..groups.schedules import GROUP", ORACLE_ROOMS),
    ("oracle/session/session.py", "from ..episodes.cases import Case", ORACLE_ROOMS),
    ("oracle/options.py", "from .session.session import Session", ORACLE_ROOMS),
    ("oracle/results/report.py", "from ..references.samples import Prompt", ORACLE_ROOMS),
    ("oracle/fuzz/target.py", "from ..groups import GROUPS", ORACLE_ROOMS),
    ("ports/core.py", "from .port import Gemma4Port", PORTS_ROOMS),
    ("ports/capabilities/host_stages.py", "from ..static import StaticRuntimePort", PORTS_ROOMS),
    ("ports/static.py", "from .registry import BUILT_IN", PORTS_ROOMS),
    ("ports/adapters/executorch/port.py", "from ..qnn.support import stub_package", ADAPTERS_ROOMS),
    ("ports/adapters/tico/port.py", "from ..qnn.support import stub_package", ADAPTERS_ROOMS),
]


def _dotted(module: str) -> str:
    return "gemma4_static." + module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def test_every_contract_fails_on_a_deliberate_violation(tmp_path):
    """A copy of the package with every forbidden import of :data:`VIOLATIONS` added breaks every
    contract, and each contract's report names each import added against it (one linter run)."""
    added: dict[str, str] = {}
    for module, violation, _ in VIOLATIONS:
        before = added.get(module) or (PACKAGE / module).read_text()
        added[module] = before + f"\n{violation}  # deliberate violation\n"
    result = _lint_imports(package_copy(tmp_path, added))
    assert result.returncode != 0 and f"0 kept, {CONTRACTS} broken" in result.stdout, result.stdout
    report = result.stdout.split("Broken contracts", 1)[1]
    starts = sorted((report.index(contract), contract) for contract in {c for _, _, c in VIOLATIONS})
    ends = [start for start, _ in starts[1:]] + [len(report)]
    sections = {contract: report[start:end] for (start, contract), end in zip(starts, ends, strict=True)}
    for module, violation, contract in VIOLATIONS:
        assert f"{_dotted(module)} ->" in " ".join(sections[contract].split()), (module, violation, contract)
    broken = [line for line in result.stdout.splitlines() if line.rstrip().endswith("BROKEN")]
    assert len(broken) == CONTRACTS
    assert all(any(line.startswith(contract) for line in broken) for _, _, contract in VIOLATIONS)


def test_importing_the_runtime_imports_neither_hf_nor_pillow():
    """Nor does reading the check groups (the docs' tables, a port author's new group): the oracle
    asks transformers only where it asks HF something (importing it costs about 2 s). The package and
    its pytest plugin, loaded by every pytest session of an environment that has the package, import
    no torch either until a name is used (about 1 s), nor does the command line until it runs something
    (``gemma4-static --help`` answers in a tenth of a second, not two)."""
    found = "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'transformers', 'PIL'}))"
    probe = (
        "import sys, gemma4_static, gemma4_static.pytest_plugin; "
        f"from gemma4_static.commands.cli import build_parser; build_parser(); {found}; "
        f"gemma4_static.StaticGemma4Runtime; import gemma4_static.export; {found}; "
        f"import gemma4_static.oracle.groups; {found}"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    # Pillow: the verify extra's, imported with the oracle so that a missing extra is named at once
    assert result.stdout.splitlines() == ["[]", "['torch']", "['PIL', 'torch']"]


def test_every_public_name_is_its_modules_own():
    """The package's names, loaded on first use, are the objects their modules define, and a name it
    does not have is an ``AttributeError`` naming it."""
    import importlib

    import gemma4_static

    for name, home in gemma4_static._HOMES.items():
        assert getattr(gemma4_static, name) is getattr(importlib.import_module(f"gemma4_static.{home}"), name)
    assert sorted(gemma4_static.__all__) == sorted(gemma4_static._HOMES) and set(gemma4_static.__all__) <= set(
        dir(gemma4_static)
    )
    with pytest.raises(AttributeError, match="module 'gemma4_static' has no attribute 'StaticRuntime'"):
        gemma4_static.StaticRuntime  # noqa: B018


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
    ``src/gemma4_static`` is named in it (so a new room or module comes with its line), but the check
    groups, whose table the page generates from the code."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    tree = page[page.index("```\nsrc/gemma4_static/") : page.index("\n```", page.index("src/gemma4_static/"))]
    words = set(re.findall(r"[\w.]+", tree))
    names = {
        path.stem if path.suffix == ".py" else path.name
        for path in PACKAGE.rglob("*")
        if "__pycache__" not in path.parts
        and path.parent != PACKAGE / "oracle" / "groups"
        and not path.name.startswith("__")
        and (path.is_dir() or path.suffix in (".py", ".json"))
    }
    missing = {name for name in names if name not in words and f"{name}.py" not in words and f"{name}/" not in tree}
    assert missing == set(), f"modules the architecture page's tree does not name: {sorted(missing)}"
