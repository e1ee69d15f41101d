"""Kernel sets: which CPU kernels compute the products and reductions, chosen at process start.

The same code sums in another order on another processor, so the low bits of every float result
depend on the kernels a machine takes. Three switches decide them, each read once when the process
first uses it (so a kernel set applies to a new process, never to a running one):

- ``ATEN_CPU_CAPABILITY`` (``default``, ``avx2``, ``avx512``): ATen's vectorised kernels (softmax,
  reductions, elementwise ops, and the bf16/fp16 matrix products oneDNN does not take);
- ``ONEDNN_MAX_CPU_ISA`` (e.g. ``AVX2``, ``AVX512_CORE``): the highest instruction set oneDNN may
  use. bf16 matrix products go to oneDNN only where it has AVX-512 (``AVX512_CORE`` emulates bf16,
  ``AVX512_CORE_BF16`` has the instructions); below, PyTorch computes them with ATen's own kernels;
- MKL (the BLAS of the CPU wheel; fp32 matrix products): ``MKL_ENABLE_INSTRUCTIONS`` caps its
  instruction set on Intel processors (MKL takes its AVX2 path on AMD ones whatever it is set to);
  ``MKL_CBWR=COMPATIBLE`` selects its conditional-reproducibility path on any processor.

An AVX2-only machine is reproduced on an AVX-512 one by the ``avx2`` set: ATen's AVX2 kernels and
oneDNN capped at AVX2 together (either alone left the bf16 products as they were).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..results.report import counted

# Set in a process started under a kernel set, so that it can tell it already runs under one.
MARKER = "GEMMA4_KERNEL_SET"


@dataclass(frozen=True)
class KernelSet:
    """A named kernel set: the variables it sets, the CPU flags it needs (names of
    ``torch.cpu.get_capabilities()``) and the ATen capability the process must then report
    (``None``: whatever the CPU has)."""

    name: str
    about: str
    env: Mapping[str, str] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    aten: str | None = None

    def unsupported(self) -> str | None:
        """Why this machine cannot run the set (a missing CPU flag), or ``None``."""
        import torch  # in each function: a process that only reads MARKER imports no torch (a test controller)

        capabilities = torch.cpu.get_capabilities()
        missing = [flag for flag in self.needs if not capabilities.get(flag)]
        if missing:
            return f"kernel set {self.name} needs CPU flags {missing}, which this {capabilities.get('cpu_name')} lacks"
        return None

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) with the set's variables and :data:`MARKER`."""
        return {**(os.environ if base is None else base), **self.env, MARKER: self.name}


KERNEL_SETS = {
    kernel_set.name: kernel_set
    for kernel_set in (
        KernelSet("native", "whatever this CPU offers (no variable set)"),
        KernelSet(
            "avx2",
            "an x86-64 CPU with AVX2 and no AVX-512: ATen's AVX2 kernels, oneDNN and MKL capped at AVX2",
            {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
            ("avx2", "fma3"),
            "AVX2",
        ),
        KernelSet(
            "avx512",
            "AVX-512 without bf16 instructions (Skylake to Cascade Lake servers): oneDNN emulates bf16",
            {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
            ("avx512_f", "avx512_bw", "avx512_vl", "avx512_dq"),
            "AVX512",
        ),
        KernelSet(
            "baseline",
            "no vector extension past SSE4.1: ATen's default kernels, oneDNN at SSE4.1, MKL's COMPATIBLE path",
            {"ATEN_CPU_CAPABILITY": "default", "ONEDNN_MAX_CPU_ISA": "SSE41", "MKL_CBWR": "COMPATIBLE"},
            ("sse4_1",),
            "DEFAULT",
        ),
    )
}


def kernel_set_named(name: str) -> KernelSet:
    """The kernel set ``name``, or a ``ValueError`` naming the known ones."""
    if name not in KERNEL_SETS:
        raise ValueError(f"kernel set must be one of {list(KERNEL_SETS)}, got {name!r}")
    return KERNEL_SETS[name]


def active_kernels() -> str:
    """What this process runs: the kernel set it was started under (if any), ATen's capability and
    the intra-op thread count, e.g. ``kernel set avx2, ATen AVX2, 1 thread``."""
    import torch

    threads = torch.get_num_threads()
    started = os.environ.get(MARKER)
    prefix = f"kernel set {started}, " if started else ""
    return f"{prefix}ATen {torch.backends.cpu.get_cpu_capability()}, {counted(threads, 'thread')}"


def check_active(name: str) -> None:
    """``ValueError`` when this process does not run the kernels of set ``name`` (its ATen capability
    differs from the set's), e.g. a variable overridden or ignored."""
    import torch

    kernel_set = kernel_set_named(name)
    capability = torch.backends.cpu.get_cpu_capability()
    if kernel_set.aten is not None and capability != kernel_set.aten:
        raise ValueError(f"kernel set {name} should run ATen {kernel_set.aten}, but this process runs {capability}")


def rerun_under(name: str, argv: list[str]) -> int | None:
    """Run ``python -m gemma4_static *argv`` in a new process under kernel set ``name`` and return its
    exit code; ``None`` when this process already runs under it (checked: ``ValueError`` otherwise,
    as for a set this CPU cannot run)."""
    kernel_set = kernel_set_named(name)
    if os.environ.get(MARKER) == name:
        check_active(name)
        return None
    reason = kernel_set.unsupported()
    if reason is not None:
        raise ValueError(reason)
    return subprocess.run([sys.executable, "-m", "gemma4_static", *argv], env=kernel_set.environment()).returncode


def describe(name: str | None = None) -> tuple[int, list[str]]:
    """``gemma4-static kernels``: every set with what it runs and whether this CPU can (exit 0); with
    ``name``, that set's variables as ``KEY=VALUE`` lines (for a CI job's environment), or the reason
    this CPU cannot run it (exit 1)."""
    if name is None:
        lines = [
            f"{kernel_set.name:<9} {kernel_set.unsupported() or 'runs here'}: {kernel_set.about}"
            for kernel_set in KERNEL_SETS.values()
        ]
        return 0, lines
    kernel_set = kernel_set_named(name)
    reason = kernel_set.unsupported()
    if reason is not None:
        return 1, [reason]
    return 0, [f"{key}={value}" for key, value in {**kernel_set.env, MARKER: name}.items()]
