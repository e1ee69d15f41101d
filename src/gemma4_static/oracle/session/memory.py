"""What a verification of a checkpoint needs in memory, estimated before anything is loaded, the
memory the machine has, and the peak a run measured.

:func:`estimate` adds, in bytes (:class:`MemoryEstimate`, each part named):

- **weights**: in the stored dtype, the files' pages (counted whole: an upper bound, since a prompt
  reads few rows of the embedding tables). In another dtype the embedding tables the LM head does
  not read stay so (read row-wise: :func:`..references.streamed.converted`) and every other
  parameter is a converted copy beside the file pages it was read from.
- **float64 reference** (the low-precision and integer profiles): HF in float64 streamed
  (:mod:`..references.streamed`): what is up-cast once, the largest layer, one LM head chunk.
- **HF quantized** (an integer profile): HF's copy in the scheme (torchao), its weights in float32
  beside their integer form.
- **port** (a port that copies the weights): its declared ``PortLimits.bytes_per_parameter``, the
  run's own instance and the one a group builds beside it.
- **reordered weights** (this runtime on ``torch-packed``): oneDNN's copy of its projections and LM
  head in the profile's dtype (counted as every parameter but the tables read row-wise: an upper
  bound), made once and shared by every instance the run builds.
- **lowering** (this runtime on an ExecuTorch backend): its programs are lowered in this process,
  each holding a copy of the weights it runs (:data:`LOWERING_BYTES_PER_PARAMETER`, a floor).
- **logits**: the port's logits at every position of the sample prompt in the profile's dtype, and
  HF's at the positions kept (:data:`.session.LOGITS_BUDGET`) in the profile and in float64 with
  the two temporaries of its logit softcap.
- **base**: the interpreter with torch and transformers, and a forward's working space.

The parts come from the checkpoint's config alone (the model built on the ``meta`` device: shapes,
no storage) and its files' headers (:class:`..references.checkpoints.CheckpointFiles`)."""

from __future__ import annotations

import os
import resource
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...backends import backend_named
from ...ports.registry import declared_limits, port_factory
from ..options import VerifyOptions
from ..references.checkpoints import CheckpointFiles, model_class
from ..references.streamed import HEAD_CHUNK, StreamingPlan, kept_tables
from .sample_plan import ONE_ROW, sample_plan
from .session import LOGITS_BUDGET, decode_steps

GIB = 1 << 30
# this runtime's one ExecuTorch program lowered at E2B's real widths (10 layers, 1.59 billion
# parameters, float32) held more than 16 GB above the model, still rising when it was stopped at 22 GB
LOWERING_BYTES_PER_PARAMETER = 10
BASE = 3 * GIB // 2  # the interpreter with torch and transformers (0.7 GB measured) and a forward's working space
SOFTCAP_COPIES = 3  # the logits, then tanh(x / c) and its product with c: two temporaries beside them
MEMINFO = Path("/proc/meminfo")
PROC_STATUS = Path("/proc/self/status")


@dataclass(frozen=True)
class MemoryEstimate:
    """A run's memory by part, in bytes (``parts``: name -> bytes)."""

    parts: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        """``"12.3 GB (weights 9.3, float64 reference 1.2, ...)"``."""
        listed = ", ".join(f"{name} {gigabytes(size)}" for name, size in self.parts.items())
        return f"{gigabytes(self.total)} GB ({listed})"


def gigabytes(size: float) -> str:
    """``size`` bytes in GB (10^9), one decimal."""
    return f"{size / 1e9:.1f}"


def estimate(files: CheckpointFiles, options: VerifyOptions) -> MemoryEstimate:
    """The memory a run of ``options`` on the checkpoint ``files`` needs (see the module's docstring)."""
    config = files.config
    text = config.get_text_config()
    with torch.device("meta"):
        shapes = model_class(config)(config)
    itemsize, stored = options.dtype.itemsize, files.stored_dtype.itemsize
    parts = {"weights": files.parameters * stored}
    tables = sum(table.weight.numel() for table in kept_tables(shapes))
    if options.dtype != files.stored_dtype:
        parts["weights"] += (files.parameters - tables) * itemsize
    if not options.float32:
        plan = StreamingPlan.of(shapes)
        eager = sum(parameter.numel() for _, _, parameter in plan.eager_parameters(shapes))
        largest = max((sum(p.numel() for p in layer.parameters()) for layer in plan.layers), default=0)
        parts["float64 reference"] = 8 * (eager + largest + HEAD_CHUNK * text.hidden_size)
    if options.scheme is not None:
        parts["HF quantized"] = 5 * files.parameters
    limits = declared_limits(port_factory(options.port)) or ONE_ROW
    if limits.bytes_per_parameter:
        parts["port"] = int(limits.bytes_per_parameter * files.parameters)
    backend = backend_named(options.backend)
    if backend.packed:
        parts["reordered weights"] = (files.parameters - tables) * itemsize
    if not backend.eager:
        parts["lowering"] = LOWERING_BYTES_PER_PARAMETER * files.parameters
    prompt, _, setup = sample_plan(config, limits, decode_steps(config, options), options.max_seq)
    rows, vocab = prompt.input_ids.shape[0], text.vocab_size
    kept = min(LOGITS_BUDGET, rows * prompt.input_ids.shape[1] * vocab)
    hf_itemsize = itemsize + (0 if options.float32 else 8)
    parts["logits"] = rows * setup.max_seq * vocab * itemsize + SOFTCAP_COPIES * kept * hf_itemsize
    parts["base"] = BASE
    return MemoryEstimate(parts)


def proc_kilobytes(path: Path, field: str) -> int | None:
    """Bytes of ``field`` (a ``"Name:   1234 kB"`` line) in the ``/proc`` file ``path``; ``None``
    where the file or the field is missing."""
    if not path.is_file():
        return None
    for line in path.read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return None


def available_memory() -> int | None:
    """The memory this machine can give a run, in bytes: ``MemAvailable`` (Linux), else the physical
    memory (``None`` where neither can be read)."""
    available = proc_kilobytes(MEMINFO, "MemAvailable")
    if available is not None:
        return available
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def peak_resident() -> int:
    """This process's peak resident memory so far, in bytes: ``VmHWM`` (Linux: this program's own,
    where ``ru_maxrss`` keeps the peak of the process it was started from across ``exec``), else
    ``ru_maxrss`` (KiB on Linux, bytes on macOS)."""
    peak = proc_kilobytes(PROC_STATUS, "VmHWM")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


@dataclass(frozen=True)
class Budget:
    """A checkpoint run's memory: the checkpoint ``files``, the estimate ``needed``, the memory
    ``found`` available on the machine and the ``limit`` the run is held to (``--memory``, else
    what was found; ``None`` where nothing could be read)."""

    files: CheckpointFiles
    needed: MemoryEstimate
    found: int | None
    limit: int | None

    @classmethod
    def of(cls, files: CheckpointFiles, options: VerifyOptions, memory_gb: float | None = None) -> Budget:
        """The budget of a run of ``options`` on ``files``, held to ``memory_gb`` where given."""
        found = available_memory()
        limit = found if memory_gb is None else int(memory_gb * 1e9)
        return cls(files, estimate(files, options), found, limit)

    def describe(self) -> str:
        """One line: the checkpoint, the estimate by part, the memory found."""
        files = self.files
        found = "unknown memory" if self.found is None else f"{gigabytes(self.found)} GB"
        return (
            f"{files.folder}: {files.parameters / 1e9:.2f} billion parameters stored in "
            f"{str(files.stored_dtype).removeprefix('torch.')} ({gigabytes(files.size_bytes)} GB); "
            f"this run needs an estimated {self.needed.describe()}; {found} available"
        )

    def check(self) -> None:
        """A ``ValueError`` naming the estimate and the memory where the run cannot fit."""
        if self.limit is None or self.needed.total <= self.limit:
            return
        held = "given by --memory" if self.limit != self.found else "this machine has available"
        largest = max(self.needed.parts, key=self.needed.parts.get)
        raise ValueError(
            f"the run needs an estimated {self.needed.describe()}, more than the {gigabytes(self.limit)} GB {held}; "
            f"its largest part is {largest}: run it on a machine with more memory, or give --memory GB to run it anyway"
        )

    def peak_text(self) -> str:
        """The peak resident memory so far against the checkpoint's size and the estimate."""
        peak = peak_resident()
        return (
            f"{gigabytes(peak)} GB ({peak / self.files.size_bytes:.2f}x the checkpoint's "
            f"{gigabytes(self.files.size_bytes)} GB; estimated {gigabytes(self.needed.total)} GB)"
        )

    def measured(self) -> dict[str, Any]:
        """What a report records (call it after the run): the checkpoint, the estimate by part, the
        memory found and the limit, the peak resident memory measured."""
        return {
            "checkpoint": self.files.describe(),
            "estimate_bytes": self.needed.total,
            "estimate_parts": dict(self.needed.parts),
            "available_bytes": self.found,
            "limit_bytes": self.limit,
            "peak_resident_bytes": peak_resident(),
        }
