"""The ``decode`` check group: decode steps per row against HF's ``DynamicCache``, greedy generation
against HF's ``generate``, every special id fed on purpose, the K/V after the steps, and the sample
prompt again (a prefill starts a new conversation); in a low-precision profile against HF in
float64, by the token rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import torch

from ...ports import PortSetup
from ...ports.capabilities.host_stages import KV_CACHE
from ..checks import parity
from ..numerics import parity_numerics
from ..references.hf import hf_decode_logits, hf_generate, hf_greedy, hf_last_logits
from ..references.samples import Prompt, special_ids
from ..results import tolerances
from ..results.report import Row, merge_by
from ..session.port_calls import guarded, port_prefill
from ..session.sample_plan import SEEDS
from ..session.session import Session
from . import CheckGroup
from ._shared import kv_rows


def decode_rows(session: Session) -> Iterator[Row]:
    """``steps`` decode steps per row vs HF's DynamicCache, then greedy generation vs HF generate,
    then the sample prompt again: a prefill starts a new conversation."""
    prompt, port, steps = session.port_prompt, session.port, session.steps
    batch = prompt.input_ids.shape[0]
    vocab = session.config.get_text_config().vocab_size
    generator = torch.Generator().manual_seed(SEEDS["decode tokens"])
    tokens = torch.randint(3, min(vocab, 400), (batch, steps), generator=generator)
    if session.low_precision:
        yield from low_precision_rows(session, tokens)
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
        yield from guarded("KV cache", check, lambda: kv_rows(session, tokens))
    yield from guarded("conversation", "prefill again", lambda: [new_conversation_row(session)])


PLACEHOLDER, OTHER = "placeholder", "other"
SPECIAL_KINDS = {OTHER: "special ids", PLACEHOLDER: "placeholders"}  # each kind fed, with its rows' label


def with_special_ids(session: Session, kind: str) -> tuple[Prompt, dict]:
    """The sample prompt's first row with the model's special ids of ``kind`` (:data:`SPECIAL_KINDS`)
    after it (:func:`~..references.samples.special_ids`; never the image placeholder there: it marks
    where an image's soft tokens go, HF refuses one beside images whose count it breaks, a static
    layout one outside its image slots), and those special ids by name."""
    if kind not in SPECIAL_KINDS:
        raise ValueError(f"kind must be one of {tuple(SPECIAL_KINDS)}, got {kind!r}")
    specials = {name: value for name, value in special_ids(session.config).items() if kind_of(name) == kind}
    row = session.prompt.row(0)
    inside = torch.tensor([[value for name, value in specials.items() if name != "image_token_id"]], dtype=torch.long)
    ids = torch.cat((row.input_ids, inside), dim=1)
    return dataclasses.replace(row, input_ids=ids, attention_mask=torch.ones_like(ids)), specials


def kind_of(name: str) -> str:
    """:data:`PLACEHOLDER` for the image, video and audio placeholders (what HF's multimodal forward
    maps to the pad id), :data:`OTHER` for the rest (``boi``/``eoi``, ``boa``/``eoa``, BOS, EOS, pad)."""
    return PLACEHOLDER if name in parity.PLACEHOLDER_FIELDS else OTHER


def special_id_rows(session: Session) -> list[Row]:
    """Every special id fed on purpose, against HF (whose multimodal forward maps every placeholder to
    the pad id, decode included): the placeholders and the other special ids each inside a prompt
    (:func:`with_special_ids`), then each as a decode input; one row each."""
    return [row for kind in SPECIAL_KINDS for row in _special_rows(session, kind)]


def _special_rows(session: Session, kind: str) -> list[Row]:
    prompt, specials = with_special_ids(session, kind)
    if not specials:
        return []
    fed = torch.tensor([list(specials.values())])
    setup = PortSetup(session.static_length(prompt.input_ids.shape[1] + fed.shape[1] + 2), 1, prompt.image_slots)
    with session.built(setup) as port:
        first = port_prefill(port, prompt.padded(port.limits.batch.padding_side))
        if isinstance(first, Exception):
            raise first
        ours = parity.port_decode(port, fed)[0]
    theirs = hf_decode_logits(session.model, prompt, fed)[0]
    names = list(specials)
    inside = [name.removesuffix("_token_id") for name in names if name != "image_token_id"]
    label = SPECIAL_KINDS[kind]
    rows = []
    if inside:
        hf_logits = hf_last_logits(session.model, prompt)[0]
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


def low_precision_rows(session: Session, tokens: torch.Tensor) -> Iterator[Row]:
    """Decode ``tokens (B, T)`` after the prefill, then greedy generation; against float64."""
    prompt, gate = session.prompt, session.gate
    batch, steps = tokens.shape
    with session.recording():
        session.ours  # noqa: B018 (the decode continues the sample prompt's prefill: its error again if it raised)
        ours = parity.port_decode(session.port, tokens)
    models = (("hf", session.hf_model), ("ref", session.reference_model))
    decoded = {name: hf_decode_logits(model, prompt, tokens) for name, model in models}
    flat = [logits.flatten(0, 1) for logits in (ours, decoded["hf"], decoded["ref"])]
    check = f"{batch} rows x {steps} steps"
    yield from parity_numerics.metric_rows("decode steps", check, *flat, gate)
    yield from parity_numerics.token_rows(
        "decode steps", check, *flat, gate, lambda index: f"row {index // steps} step {index % steps}"
    )
    with session.recording():
        generated = session.port.generate(session.port_prompt, max_new_tokens=steps)
    hf_tokens = hf_generate(session.hf_model, prompt, max_new_tokens=steps, eos_token_id=None)
    tokens, logits = hf_greedy(session.reference_model, prompt, max_new_tokens=steps, eos_token_id=None)
    bound = gate.token_bound(logits.flatten(0, 1)).view(tokens.shape)
    check = f"{batch} rows x {steps} greedy tokens vs float64 generate"
    yield from parity_numerics.greedy_rows("generation", check, generated, tokens, logits, bound, hf=hf_tokens)


GROUP = CheckGroup(
    name="decode",
    order=110,
    describe="decode steps and greedy generation against HF, every special id fed on purpose, the K/V after "
    "the steps, and a new conversation after them",
    rows=decode_rows,
    reads=(KV_CACHE,),
    minimum=("decode steps",),
)
