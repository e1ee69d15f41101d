"""A reference folder: a :class:`~.recording.Recording` on disk and what it was recorded for.

``answers.safetensors`` holds every tensor of HF's answers; ``manifest.json`` (version
:data:`REFERENCE_VERSION`, JSON Schema ``reference.schema.json`` shipped in this package) names
the model (its fingerprint: class, config and weights), the transformers and torch versions, the
profiles, the sample plans it answers (one per port limits recorded for), the seeds and tolerances,
the answers file's sha256 and every call with its packed answer. :func:`open_reference` refuses,
with the reason, a folder that is not one, a corrupted or altered answers file and another
transformers version; :meth:`Reference.admit_model` and :meth:`Reference.admit_plan` refuse another
model, profile or sample plan."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..results import tolerances
from .recording import Recording, digest_of, fingerprint

REFERENCE_VERSION = 1
ANSWERS = "answers.safetensors"
MANIFEST = "manifest.json"


def schema() -> dict[str, Any]:
    """The manifest's JSON Schema (draft 2020-12)."""
    return json.loads(resources.files(__package__).joinpath("reference.schema.json").read_text())


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def plan_digest(prompt: Any, steps: int, setup: Any) -> str:
    """The key of a sample plan: the prompt (content), the decode steps and the port's setup."""
    return digest_of((prompt, steps, setup))


@dataclass
class Reference:
    """An open reference folder: its recording and manifest (``model``, ``profiles``, ``plans``...)."""

    folder: Path
    recording: Recording
    manifest: dict[str, Any] = field(default_factory=dict)
    label: tuple[str, bool] = ("", False)  # record mode: the port being recorded for, and on a stand-in

    def describe(self) -> str:
        """One line naming the reference and its provenance, for the verdict and the report."""
        made = self.manifest["versions"]
        return (
            f"{self.folder} ({self.manifest['model']['name']}, {len(self.recording.calls)} answers, recorded "
            f"{self.manifest['created']} with transformers {made['transformers']}, torch {made['torch']})"
        )

    def admit_model(self, model: Any, profile: str) -> None:
        """``ValueError`` unless the recording was made on these weights and for this profile."""
        recorded = self.manifest["model"]
        if fingerprint(model) != recorded["fingerprint"]:
            raise ValueError(
                f"reference {self.folder} was recorded for model {recorded['name']!r} with fingerprint "
                f"{recorded['fingerprint'][:16]}...; the weights given have {fingerprint(model)[:16]}... "
                "(another model, config or weights): record it again for them"
            )
        if profile not in self.manifest["profiles"]:
            raise ValueError(
                f"reference {self.folder} holds the profiles {self.manifest['profiles']}, not {profile!r}: "
                f"record it with --dtype {profile}"
            )

    def admit_plan(self, port: str, prompt: Any, steps: int, setup: Any) -> None:
        """``ValueError`` unless the recording answers this sample plan (the port's limits decide it)."""
        key = plan_digest(prompt, steps, setup)
        if not any(plan["key"] == key for plan in self.manifest["plans"]):
            recorded = "; ".join(f"{plan['port']}: {plan['prompt']}" for plan in self.manifest["plans"])
            batch, length = prompt.input_ids.shape
            raise ValueError(
                f"reference {self.folder} answers the sample plans of [{recorded}]; {port} asks for "
                f"{batch} x {length} tokens, {steps} steps, max_seq {setup.max_seq} (its limits): "
                f"record it with --port {port}"
            )

    def note_plan(self, profile: str, prompt: Any, steps: int, setup: Any) -> None:
        """Record mode: the sample plan now being recorded, for the port of :attr:`label`."""
        port, stand_in = self.label
        if profile not in self.manifest["profiles"]:
            self.manifest["profiles"].append(profile)
        batch, length = prompt.input_ids.shape
        shape = f"{batch} x {length} tokens ({prompt.padding_side}-padded), {len(prompt.image_slots)} image slots"
        self.manifest["plans"].append(
            {
                "key": plan_digest(prompt, steps, setup),
                "port": port,
                "profile": profile,
                "prompt": shape,
                "steps": steps,
                "max_seq": setup.max_seq,
                "stand_in": stand_in,
            }
        )


def judged_live(model: Any, quant: str | None) -> str | None:
    """Why HF's answers for ``model`` in ``quant`` cannot be recorded and read back (``None``: they
    can): an integer profile's HF side is calibrated in the run, a mixture of experts' HF is pinned
    at the port's routing ties (an answer depends on the port, not only on the question)."""
    if quant is not None:
        return f"quant {quant!r}: an integer profile is judged live (its HF side is calibrated in the run)"
    if model.config.get_text_config().enable_moe_block:
        return "a mixture-of-experts model is judged live: HF is pinned at the port's routing ties"
    return None


def admission(
    model: Any, reference: Reference | None, port: str, profile: str, quant: str | None
) -> Callable[[Any, int, Any], None]:
    """What a verify's session calls with its sample plan (prompt, steps, setup): nothing without a
    reference; a replayed one refuses (``ValueError``) another model, profile or plan; a recorded one
    notes the plan. An integer profile or a mixture-of-experts model is judged live only."""
    if reference is None:
        return lambda prompt, steps, setup: None
    live = judged_live(model, quant)
    if live is not None:
        raise ValueError(live)
    if reference.recording.mode == "replay":
        reference.admit_model(model, profile)
        return lambda prompt, steps, setup: reference.admit_plan(port, prompt, steps, setup)
    return lambda prompt, steps, setup: reference.note_plan(profile, prompt, steps, setup)


def checked_output(folder: Path, *, force: bool = False) -> None:
    """A ``ValueError`` naming ``folder`` and why a new reference cannot be written there, checked before
    any work: a file, a place that cannot be written, a reference there already (``force``: it is
    replaced), or a folder holding other files (``force``: written beside them)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--out {folder} is a file, not a folder for a reference")
    if (folder / MANIFEST).exists() and not force:
        raise ValueError(f"--out {folder} holds a reference already: --force replaces it")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MANIFEST).exists() and not force:
        raise ValueError(f"--out {folder} is a folder of other files, not a reference: --force writes beside them")
    made = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        raise ValueError(f"--out {folder} cannot be written: {error}") from None
    finally:
        for created in made:  # left as it was found
            with contextlib.suppress(OSError):
                created.rmdir()


def new_reference(folder: Path, model: Any, name: str) -> Reference:
    """An empty reference for ``model`` (called ``name``), to be filled in record mode and saved."""
    manifest = {
        "reference_version": REFERENCE_VERSION,
        "model": {"name": name, "class": type(model).__name__, "fingerprint": fingerprint(model)},
        "versions": {lib: installed(lib) for lib in ("transformers", "torch", "gemma4-static")},
        "profiles": [],
        "plans": [],
        "tolerances": {
            "relative": {str(k).removeprefix("torch."): v for k, v in tolerances.RELATIVE.items()},
            "rope": {str(k).removeprefix("torch."): v for k, v in tolerances.ROPE.items()},
            "export_relative": tolerances.EXPORT_RELATIVE,
        },
    }
    return Reference(folder, Recording("record"), manifest)


def save_reference(reference: Reference, seeds: dict[str, int]) -> None:
    """Write the folder: the answers' tensors, then the manifest naming their sha256."""
    reference.folder.mkdir(parents=True, exist_ok=True)
    answers = reference.folder / ANSWERS
    save_file(reference.recording.tensors, answers)
    reference.manifest |= {
        "seeds": dict(seeds),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "answers": {"file": ANSWERS, "sha256": _sha256(answers), "bytes": answers.stat().st_size},
        "calls": reference.recording.calls,
    }
    (reference.folder / MANIFEST).write_text(json.dumps(reference.manifest, indent=1, allow_nan=False) + "\n")


def open_reference(folder: Path) -> Reference:
    """The reference in ``folder``, in replay mode; ``ValueError`` naming the folder and the reason
    when it is not a reference, its answers file is missing, corrupted or altered, or it was recorded
    with another transformers version than the one installed."""
    manifest_path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"reference must be a folder written by gemma4-static record, got {folder}: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("reference_version") != REFERENCE_VERSION:
        found = manifest.get("reference_version") if isinstance(manifest, dict) else None
        raise ValueError(f"reference {folder}: manifest version {found!r}, this release reads {REFERENCE_VERSION}")
    answers = Path(folder) / manifest["answers"]["file"]
    if not answers.is_file() or _sha256(answers) != manifest["answers"]["sha256"]:
        raise ValueError(
            f"reference {folder}: {answers.name} is missing or does not match the sha256 its manifest names "
            "(corrupted or altered): nothing is judged against it; record it again"
        )
    made, here = manifest["versions"]["transformers"], installed("transformers")
    if here is not None and made != here:
        raise ValueError(
            f"reference {folder} was recorded with transformers {made}; {here} is installed: HF's answers may "
            "differ between releases, record it again with this one"
        )
    try:
        tensors = load_file(answers)
    except SafetensorError as error:
        raise ValueError(f"reference {folder}: {answers.name} cannot be read: {error}") from None
    return Reference(Path(folder), Recording("replay", manifest["calls"], tensors), manifest)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
