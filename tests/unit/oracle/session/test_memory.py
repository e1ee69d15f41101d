"""A checkpoint run's memory (:mod:`~gemma4_static.oracle.session.memory`): the estimate by part from
the checkpoint's headers and config, the memory found on the machine, the refusal of a run that
cannot fit, and the peak measured."""

from __future__ import annotations

import os
import resource
from types import SimpleNamespace

import pytest
import torch

from gemma4_static.oracle.options import VerifyOptions
from gemma4_static.oracle.references.checkpoints import open_checkpoint
from gemma4_static.oracle.references.streamed import HEAD_CHUNK, StreamingPlan, kept_tables
from gemma4_static.oracle.session import memory
from gemma4_static.oracle.session.memory import BASE, Budget, MemoryEstimate, estimate
from gemma4_static.oracle.session.sample_plan import sample_plan
from gemma4_static.oracle.session.session import LOGITS_BUDGET, decode_steps
from gemma4_static.ports.registry import declared_limits, port_factory


def test_the_estimate_names_each_part(saved_bfloat16, tiny_model):
    files = open_checkpoint(saved_bfloat16)
    text = tiny_model.config.get_text_config()
    float32 = estimate(files, VerifyOptions())
    assert list(float32.parts) == ["weights", "logits", "base"]
    tables = sum(table.weight.numel() for table in kept_tables(tiny_model))  # kept in bfloat16, read row-wise
    assert tables > 0
    assert float32.parts["weights"] == 2 * files.parameters + 4 * (files.parameters - tables)
    assert float32.parts["base"] == BASE
    bfloat16 = estimate(files, VerifyOptions(dtype=torch.bfloat16))
    assert list(bfloat16.parts) == ["weights", "float64 reference", "logits", "base"]
    assert bfloat16.parts["weights"] == 2 * files.parameters == files.size_bytes
    plan = StreamingPlan.of(tiny_model)
    eager = sum(parameter.numel() for _, _, parameter in plan.eager_parameters(tiny_model))
    largest = max(sum(parameter.numel() for parameter in layer.parameters()) for layer in plan.layers)
    assert bfloat16.parts["float64 reference"] == 8 * (eager + largest + HEAD_CHUNK * text.hidden_size)
    integer = estimate(files, VerifyOptions(quant="a16w8"))
    assert integer.parts["HF quantized"] == 5 * files.parameters
    assert float32.total == sum(float32.parts.values())


def test_a_port_that_copies_the_weights_adds_what_it_declares(saved_bfloat16):
    """ExecuTorch's Gemma 4 builds its own model from the one it is given: its declared bytes per
    parameter join the estimate as "port"; this runtime reads the model's weights and adds none."""
    files = open_checkpoint(saved_bfloat16)
    declared = declared_limits(port_factory("executorch-gemma4")).bytes_per_parameter
    assert declared >= 15.4  # measured: 16.0 GB for two instances over 1.04 billion parameters
    copied = estimate(files, VerifyOptions(port="executorch-gemma4"))
    assert copied.parts["port"] == int(declared * files.parameters)
    assert list(copied.parts).index("port") == list(copied.parts).index("logits") - 1
    assert "port" not in estimate(files, VerifyOptions()).parts


@pytest.mark.parametrize("backend", ["executorch", "executorch-stages"])
def test_a_lowered_backend_adds_its_programs(saved_bfloat16, backend):
    """This runtime's ExecuTorch programs are lowered in the run's process, each with its weights."""
    files = open_checkpoint(saved_bfloat16)
    lowered = estimate(files, VerifyOptions(backend=backend))
    assert lowered.parts["lowering"] == memory.LOWERING_BYTES_PER_PARAMETER * files.parameters >= 10 * files.parameters
    assert "lowering" not in estimate(files, VerifyOptions(backend="torch")).parts


def test_the_packed_backend_adds_its_reordered_copy(saved_bfloat16, tiny_model):
    """``torch-packed`` reorders the projections and the LM head once (a copy in the profile's dtype);
    the per-layer-embedding table, read row-wise, is not among them."""
    files = open_checkpoint(saved_bfloat16)
    tables = sum(table.weight.numel() for table in kept_tables(tiny_model))
    for dtype in (torch.float32, torch.bfloat16):
        packed = estimate(files, VerifyOptions(backend="torch-packed", dtype=dtype))
        assert packed.parts["reordered weights"] == dtype.itemsize * (files.parameters - tables)
        assert packed.parts["weights"] == estimate(files, VerifyOptions(dtype=dtype)).parts["weights"]
    assert "reordered weights" not in estimate(files, VerifyOptions()).parts


def test_the_logits_part_follows_the_kept_positions(saved_bfloat16, tiny_model):
    """The port's logits at every position of its sample setup, HF's at the kept ones (all of them
    within the budget, with the softcap's two temporaries) in the profile and in float64."""
    files = open_checkpoint(saved_bfloat16)
    options = VerifyOptions(dtype=torch.bfloat16)
    vocab = tiny_model.config.get_text_config().vocab_size
    limits = declared_limits(port_factory(options.port))
    prompt, _, setup = sample_plan(tiny_model.config, limits, decode_steps(tiny_model.config, options), None)
    rows, length = prompt.input_ids.shape
    assert rows == 2 and setup.max_seq > length  # two rows; room for the decode steps
    kept = min(LOGITS_BUDGET, rows * length * vocab)
    assert estimate(files, options).parts["logits"] == rows * setup.max_seq * vocab * 2 + 3 * kept * (2 + 8)
    # float32: no float64 reference beside HF's logits
    float32 = estimate(files, VerifyOptions()).parts["logits"]
    assert float32 == rows * setup.max_seq * vocab * 4 + 3 * kept * 4
    # the run's own max_seq sizes the port's logits
    longer = VerifyOptions(dtype=torch.bfloat16, max_seq=4 * setup.max_seq)
    assert estimate(files, longer).parts["logits"] == rows * 4 * setup.max_seq * vocab * 2 + 3 * kept * (2 + 8)


def test_a_run_that_cannot_fit_is_refused_naming_both_figures(saved_bfloat16):
    files = open_checkpoint(saved_bfloat16)
    budget = Budget.of(files, VerifyOptions(dtype=torch.bfloat16), memory_gb=0.001)
    assert budget.limit == 1_000_000
    assert Budget.of(files, VerifyOptions(), memory_gb=12).limit == 12 * 10**9  # GB are 10^9 bytes
    with pytest.raises(ValueError) as refused:
        budget.check()
    message = str(refused.value)
    assert message.startswith(f"the run needs an estimated {budget.needed.describe()}, more than the 0.0 GB given by")
    assert (
        "--memory GB" in message
        and f"its largest part is {max(budget.needed.parts, key=budget.needed.parts.get)}" in message
    )
    Budget(files, budget.needed, found=None, limit=None).check()  # nothing found, nothing refused
    assert Budget(files, budget.needed, found=None, limit=None).describe().endswith("; unknown memory available")
    described = Budget(files, budget.needed, found=12 * 10**9, limit=None).describe()
    stored = f"{files.folder}: {files.parameters / 1e9:.2f} billion parameters stored in bfloat16"
    assert described.startswith(stored) and described.endswith("; 12.0 GB available")
    roomy = Budget(files, budget.needed, found=budget.needed.total, limit=budget.needed.total)
    roomy.check()
    tight = Budget(files, budget.needed, found=budget.needed.total - 1, limit=budget.needed.total - 1)
    with pytest.raises(ValueError, match="this machine has available"):
        tight.check()


@pytest.mark.parametrize(
    ("path", "field", "read", "fallback"),
    [
        (
            "MEMINFO",
            "MemAvailable",
            memory.available_memory,
            lambda: os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
        ),
        # VmHWM, not ru_maxrss (which keeps the peak of the process a run was started from)
        (
            "PROC_STATUS",
            "VmHWM",
            memory.peak_resident,
            lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        ),
    ],
)
def test_the_machine_memory_and_the_peak_are_read_from_proc(tmp_path, monkeypatch, path, field, read, fallback):
    """The field of its ``/proc`` file where there is one, the portable figure where there is none."""
    proc = tmp_path / "proc"
    proc.write_text(f"MemTotal:       24000000 kB\nVmPeak:\t 9000000 kB\n{field}:   1234 kB\nVmRSS:\t 1000 kB\n")
    monkeypatch.setattr(memory, path, proc)
    assert read() == 1234 * 1024
    monkeypatch.setattr(memory, path, tmp_path / "absent")
    assert read() == fallback()
    proc.write_text("MemTotal:       24000000 kB\n")  # the file without the field
    monkeypatch.setattr(memory, path, proc)
    assert read() == fallback()


def test_without_proc_the_peak_is_ru_maxrss_in_the_platforms_unit(tmp_path, monkeypatch):
    """KiB on Linux, bytes on macOS (``getrusage``'s ``ru_maxrss``)."""
    monkeypatch.setattr(memory, "PROC_STATUS", tmp_path / "absent")
    kilobytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    monkeypatch.setattr(memory.resource, "getrusage", lambda who: SimpleNamespace(ru_maxrss=kilobytes))
    monkeypatch.setattr(memory.sys, "platform", "linux")
    assert memory.peak_resident() == kilobytes * 1024
    monkeypatch.setattr(memory.sys, "platform", "darwin")
    assert memory.peak_resident() == kilobytes


def test_the_peak_counts_what_this_process_holds():
    held = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MiB, touched
    assert memory.peak_resident() >= held.numel()


def test_an_estimate_describes_itself_in_gigabytes():
    needed = MemoryEstimate({"weights": 9_300_000_000, "base": 1_610_612_736})
    assert needed.total == 10_910_612_736
    assert needed.describe() == "10.9 GB (weights 9.3, base 1.6)"


def test_the_peak_reads_against_the_checkpoints_size_and_the_estimate(saved_bfloat16, monkeypatch):
    files = open_checkpoint(saved_bfloat16)
    budget = Budget.of(files, VerifyOptions(dtype=torch.bfloat16))
    monkeypatch.setattr(memory, "peak_resident", lambda: 3 * files.size_bytes)
    peak, size, needed = (
        f"{value / 1e9:.1f}" for value in (3 * files.size_bytes, files.size_bytes, budget.needed.total)
    )
    assert budget.peak_text() == f"{peak} GB (3.00x the checkpoint's {size} GB; estimated {needed} GB)"
