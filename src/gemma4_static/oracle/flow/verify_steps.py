"""The check groups that run a port step by step: a chunked prefill, decode steps and greedy
generation against HF (low precision: against float64, :mod:`.verify_numerics`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch

from ...ports.base import PortSetup
from ..checks import parity, tolerances
from ..checks.report import Row, merge, merge_by, skip_row
from ..references.hf import hf_decode_logits, hf_prefill
from ..references.samples import Prompt, special_ids, text_prompt
from . import verify_host, verify_numerics
from .port_calls import guarded, port_prefill
from .sample_plan import SEEDS
from .session import Session

FP32 = torch.float32


def decode_rows(session: Session) -> Iterator[Row]:
    """``steps`` decode steps per row vs HF's DynamicCache, then greedy generation vs HF generate,
    then the sample prompt again: a prefill starts a new conversation."""
    prompt, port, steps = session.port_prompt, session.port, session.steps
    batch = prompt.input_ids.shape[0]
    vocab = session.config.get_text_config().vocab_size
    generator = torch.Generator().manual_seed(SEEDS["decode tokens"])
    tokens = torch.randint(3, min(vocab, 400), (batch, steps), generator=generator)
    if session.low_precision:
        yield from verify_numerics.decode_rows(session, tokens)
    else:
        with session.recording():
            model = session.model
            decoded = guarded(  # over the sample prompt's prefill: its error again if it raised
                "decode steps",
                "decode",
                lambda: session.ours and parity.decode_rows(model, port, prompt, tokens, session.dtype),
            )
            generated = guarded(
                "generation", "greedy", lambda: parity.generation_rows(model, port, prompt, max_new_tokens=steps)
            )
        if decoded[0].skipped:
            yield from decoded
        else:
            yield from merge_by(decoded, lambda row: f"{batch} rows x {steps} steps, {row.metric}")
        yield from generated
        yield from guarded("decode steps", "special ids", lambda: special_id_rows(session))
        check = f"after {steps} decode steps"
        yield from guarded("KV cache", check, lambda: verify_host.kv_rows(session, tokens))
    yield from guarded("conversation", "prefill again", lambda: [new_conversation_row(session)])


def with_special_ids(session: Session, kinds: tuple[str, ...] = ("other", "placeholder")) -> tuple[Prompt, dict]:
    """The sample prompt's first row with the model's special ids of ``kinds`` after it
    (:func:`~..references.samples.special_ids`; never the image placeholder there: it marks where an
    image's soft tokens go, HF refuses one beside images whose count it breaks, a static layout one
    outside its image slots), and those special ids by name."""
    specials = {name: value for name, value in special_ids(session.config).items() if kind_of(name) in kinds}
    row = session.prompt.row(0)
    inside = torch.tensor([[value for name, value in specials.items() if name != "image_token_id"]], dtype=torch.long)
    ids = torch.cat((row.input_ids, inside), dim=1)
    return dataclasses.replace(row, input_ids=ids, attention_mask=torch.ones_like(ids)), specials


def kind_of(name: str) -> str:
    """``"placeholder"`` for the image, video and audio placeholders (what HF's multimodal forward maps
    to the pad id), ``"other"`` for the rest (``boi``/``eoi``, ``boa``/``eoa``, BOS, EOS, pad)."""
    return "placeholder" if name in parity.PLACEHOLDER_FIELDS else "other"


def special_id_rows(session: Session) -> list[Row]:
    """Every special id fed on purpose, against HF (whose multimodal forward maps every placeholder to
    the pad id, decode included): the placeholders and the other special ids each inside a prompt
    (:func:`with_special_ids`), then each as a decode input; one row each."""
    return [row for kind in ("other", "placeholder") for row in _special_rows(session, kind)]


def _special_rows(session: Session, kind: str) -> list[Row]:
    prompt, specials = with_special_ids(session, (kind,))
    if not specials:
        return []
    fed = torch.tensor([list(specials.values())])
    setup = PortSetup(session.static_length(prompt.input_ids.shape[1] + fed.shape[1] + 2), 1, prompt.image_slots)
    with session.built(setup) as port:
        first = port_prefill(port, prompt.padded(port.limits.padding_side))
        if isinstance(first, Exception):
            raise first
        ours = parity.port_decode(port, fed)[0]
    theirs = hf_decode_logits(session.model, prompt, fed)[0]
    names = list(specials)
    inside = [name.removesuffix("_token_id") for name in names if name != "image_token_id"]
    label = "placeholders" if kind == "placeholder" else "special ids"
    rows = []
    if inside:
        hf_logits = hf_prefill(session.model, prompt).logits[0, -1]
        check = f"{len(inside)} {label} at a prompt's end ({', '.join(inside)})"
        rows.append(parity.stage_row("prefill logits", check, first.logits[0], hf_logits, session.dtype))
    decoded = parity.stage_row(
        "decode steps", f"each of {len(names)} {label} fed as a decode input", ours, theirs, session.dtype
    )
    if decoded.failed and ours.shape == theirs.shape:  # name the first special id beyond tolerance
        step = int(((ours - theirs).abs().amax(dim=-1) > decoded.tolerance).float().argmax())
        decoded = dataclasses.replace(decoded, check=f"{decoded.check} [first: {names[step]} = {int(fed[0, step])}]")
    return [*rows, decoded]


def new_conversation_row(session: Session) -> Row:
    """After the decode steps and generation, the sample prompt prefilled again gives the first
    prefill's logits again (a prefill starts a new conversation: nothing of the earlier ones may
    remain in the port's cache). The same port on the same input: a deterministic port repeats itself
    exactly; the float32 relative tolerance allows for kernels whose reduction order varies between calls."""
    again = port_prefill(
        session.port, session.port_prompt, keep_intermediates=True
    )  # as the first: the same path through the port
    if isinstance(again, Exception):
        raise again
    first = session.ours.logits
    check = "the sample prompt after decode steps and generation vs its first prefill"
    return parity.compare("conversation", check, again.logits, first, tolerances.relative(torch.float32, first))


def chunked_prefill_rows(session: Session) -> Iterator[Row]:
    """A text prompt longer than two windows prefilled in chunks of ``W + 1`` (this runtime: over
    its ring caches), against HF: the logits and, where the port exposes its cache, the K/V of every
    row and producing layer (low precision: against float64, :func:`.verify_numerics.chunked_prefill_rows`)."""
    limits = session.port.limits
    if not limits.chunked_prefill:
        yield skip_row("chunked prefill", "chunks of W + 1", f"{session.port.name} does not prefill in chunks")
        return
    if limits.needs_image:
        yield skip_row("chunked prefill", "chunks of W + 1", f"{session.port.name} needs an image in every prompt")
        return
    window, chunk = session.window, session.window + 1
    lengths = [2 * window + 3] if limits.single_row else [2 * window + 3, max(1, window - 1)]
    prompt = text_prompt(session.config, lengths, seed=SEEDS["chunked prompt"])
    max_seq = -(-(2 * window + 3) // chunk) * chunk
    with session.built(PortSetup(max_seq, prompt.input_ids.shape[0], prefill_schedule=(chunk,))) as port:
        ours = port.prefill(prompt.padded(limits.padding_side)).logits
        check = f"chunks of {chunk}"
        if session.low_precision:
            yield from verify_numerics.chunked_prefill_rows(session, port, prompt, ours, check)
            return
        rows = torch.arange(prompt.input_ids.shape[0])
        theirs = hf_prefill(session.model, prompt).logits[rows, prompt.last_index]
        yield parity.stage_row(
            "chunked prefill", f"{check}, logits of the last valid tokens", ours, theirs, session.dtype
        )
        kv_check = f"{check}, K/V of every row vs HF cache"
        kv = guarded("chunked prefill", kv_check, lambda: parity.kv_rows(port, session.model, prompt, FP32))
        yield kv[0] if kv[0].skipped else merge(kv, "chunked prefill", kv_check)
