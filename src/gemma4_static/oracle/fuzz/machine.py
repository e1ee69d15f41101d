"""The differential state machine: hypothesis drives one port through prefills of drawn lengths in
drawn schedules, decode runs, greedy generation, new prompts after decodes and the calls every port
must refuse; after every step the port's logits at every position it returned (each chunk's last
token, each row's last prompt token, every position, each decode step) are judged against HF's
forward over that row's whole token history (:mod:`..episodes.judgement`), generation by the token
rule, every stage output a prefill returned against HF's (:mod:`.stages`), and every value returned
must be finite, padding included. A failure raises
:class:`Divergence` carrying the calls made, for a standalone reproduction (:mod:`.repro`)."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from hypothesis import assume, event
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from ...cpu.schedule import chunk_starts, expand_schedule
from ...ports import NotExposed, PortPrefill
from ...ports.prompt import Prompt
from ..checks.finite import non_finite, returned_tensors
from ..checks.parity import PLACEHOLDER_FIELDS
from ..episodes.judgement import Observed, greedy_divergence, judge, judge_in_profile
from ..references.samples import special_ids as special_ids_of
from ..references.samples import text_prompt
from ..results.report import Row
from ..session.port_calls import raised_in
from .stages import stage_rows
from .strategies import boundaries, length_anchors, near, schedules, with_specials
from .target import FuzzTarget


class Divergence(AssertionError):
    """The port left HF (or accepted a call it must refuse); ``calls`` are the calls that got it there,
    ``row`` the report row it is (what the port's ``explain`` is asked about)."""

    def __init__(self, message: str, calls: list[dict[str, Any]], row: Row | None = None) -> None:
        super().__init__(message)
        self.calls = calls
        self.row = row or Row("fuzz", message, "divergences", 1, 0, detail=message)


def decode_before_prefill(target: FuzzTarget) -> Divergence | None:
    """A port freshly built must refuse a decode (its cache holds no prompt); the divergence if it takes it."""
    port, ids = target.build(target.setup(None)), torch.full((target.batch, 1), 3)
    try:
        port.decode(ids)
    except Exception:
        return None
    finally:
        port.close()
    what = "decode before any prefill"
    calls = [{"op": "refuse", "what": what, "kind": "fresh decode", "ids": ids}]
    return Divergence(f"the port accepted a call it must refuse: {what}", calls)


def machine_for(target: FuzzTarget, *, images: Any = None, special_ids: bool = True) -> type[RuleBasedStateMachine]:
    """The state machine class for ``target``. ``images(data, rows, seed) -> Prompt`` draws image
    prompts (their slots: ``target.image_slots``) instead of text. ``special_ids``: decode inputs and
    prompts also carry the model's special ids (placeholders, ``boi``/``eoi``, BOS, EOS, pad), drawn
    as often as ordinary text."""
    config = target.model.config
    window, longest_chunk, batch = target.window, target.longest_chunk, target.batch
    max_seq = target.capacity  # the tokens the port holds (one fewer where its static length counts the decode slot)
    anchors = length_anchors(window, longest_chunk, max_seq)
    text_ids = st.integers(3, min(target.vocab_size, 400))
    specials = special_ids_of(config) if special_ids else {}
    if not target.limits.images.accepted:  # a text port: a multimodal model's placeholders are out of its scope
        specials = {name: value for name, value in specials.items() if name not in PLACEHOLDER_FIELDS}
    token_ids = st.one_of(text_ids, st.sampled_from(sorted(specials.values()))) if specials else text_ids
    in_prompts = sorted(value for name, value in specials.items() if name != "image_token_id")
    pad = config.get_text_config().pad_token_id
    keeps = 0 if target.limits.contracts.generate_leaves == "all" else 1  # generated tokens its cache leaves out

    def per_row(values: st.SearchStrategy[int]) -> st.SearchStrategy[list[int]]:
        return st.lists(values, min_size=batch, max_size=batch)

    class PortMachine(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            self.prompt: Prompt | None = None  # the conversation's prompt, right-padded (HF's layout)
            self.fed = torch.zeros(batch, 0, dtype=torch.long)  # tokens decoded since, per row
            self.port = None
            self.calls: list[dict[str, Any]] = []
            target.examples += 1

        # -- helpers
        def _record(self, **call: Any) -> None:
            self.calls.append(call)

        def _fail(self, message: str, row: Row | None = None) -> None:
            if target.first_failure is None:
                target.first_failure = (target.examples, time.perf_counter() - target.started)
            raise Divergence(message, list(self.calls), row)

        def _taken(self, what: str, call: Any) -> Any:
            """``call()``, a call the port must take: what it raises is a failure (``NotExposed`` and an
            error of the checks themselves aside)."""
            try:
                return call()
            except NotExposed:
                raise
            except Exception as error:
                if raised_in(error) == "oracle":
                    raise
                self._fail(f"the port raised on a {what} it must take: {type(error).__name__}: {error}")

        def _refused(self, what: str, call: Any, **details: Any) -> None:
            """``call()`` must raise (any error is a refusal; a value is not); ``details`` say what it was."""
            self._record(op="refuse", what=what, **details)
            target.covered("refusal")
            try:
                call()
            except Exception as error:  # any error is a refusal; a value is not
                event(f"refused: {what} ({type(error).__name__})")
            else:
                self._fail(f"the port accepted a call it must refuse: {what}")
            if not target.keeps_conversation:
                self.prompt = None

        def _history(self, row: int) -> Prompt:
            """Row ``row``'s prompt then the tokens fed since, one unpadded batch-1 prompt (with images,
            a fed image placeholder becomes the pad id, as HF's decode step maps it)."""
            prompt, fed = self.prompt.row(row), self.fed[row : row + 1]
            if prompt.pixel_values is not None:
                fed = torch.where(fed == config.image_token_id, pad, fed)
            ids = torch.cat((prompt.input_ids, fed), dim=1)
            return Prompt(**{**prompt.__dict__, "input_ids": ids, "attention_mask": torch.ones_like(ids)})

        def _judge(self, observed: Observed) -> None:
            references = {row: target.reference(self._history(row)) for row in observed.rows}
            if target.gate is None:
                judgement = judge(references, observed, lambda row: target.second(self._history(row)))
            else:  # a profile: against float64 under its gate
                gate_db = min(target.gate.sqnr_gate("chunked prefill"), target.gate.sqnr_gate("decode steps"))
                judgement = judge_in_profile(references, observed, gate_db)
            target.coverage["positions compared"] += judgement.compared
            if judgement.diverged:
                message = f"logits leave HF's at {judgement.first}"
                self._fail(message, Row("fuzz", message, "max abs diff", judgement.error, judgement.tolerance))

        def _finite(self, named: Any) -> None:
            """Every value the port returned is finite, padded positions included."""
            found = non_finite(named)
            if found is not None:
                message = f"the port returned NaN or infinity: {found}"
                self._fail(message, Row("fuzz", message, "non-finite values", math.inf, 0))

        def _judge_stages(self, result: PortPrefill, given: Prompt) -> None:
            """The stage outputs a prefill returned (hidden states, per-layer inputs, soft tokens), each
            against HF's (:mod:`.stages`)."""
            for row in stage_rows(target.model, target.gate, result, given, self.prompt):
                target.coverage["stage outputs compared"] += 1
                if row.failed:
                    self._fail(
                        f"{row.stage} ({row.check}) leaves HF's: {row.value:.3g} against {row.tolerance:.3g}", row
                    )

        @property
        def lengths(self) -> torch.Tensor:
            return self.prompt.attention_mask.sum(dim=1) + self.fed.shape[1]

        # -- rules
        @rule(data=st.data())
        def prefill(self, data: st.DataObject) -> None:
            """A new prompt (ragged rows, the port's padding side) in a drawn schedule the port accepts."""
            schedule = data.draw(schedules(window, longest_chunk), label="schedule")
            seed = data.draw(st.integers(0, 99), label="seed")
            padding = data.draw(st.sampled_from(target.paddings), label="padding")
            if images is None:
                ends = boundaries(schedule, max_seq)  # a prompt ending at, before or after a chunk's end
                lengths = data.draw(per_row(near([*anchors, *ends], 1, max_seq)), label="lengths")
                prompt = text_prompt(config, lengths, seed=seed)
            else:
                prompt = images(data, batch, seed)
            prompt = with_specials(prompt, data, in_prompts)
            longest = int(prompt.attention_mask.sum(dim=1).max())
            port = target.port(schedule)
            chunks = port.prefill_schedule(longest) if schedule is None else expand_schedule(schedule, longest)
            assume(target.limits.chunks.refusal(chunks) is None and not target.splits_an_image(chunks))
            target.covered("prefill", longest, chunks)
            given = prompt.padded(padding)
            # intermediates asked for (every output judged) or not (the path a deployment runs); always
            # where there are several chunks, whose ends' logits are intermediates
            keep = len(chunks) > 1 or data.draw(st.booleans(), label="intermediates")
            self._record(op="prefill", prompt=given, schedule=schedule, chunks=chunks, intermediates=keep)
            result = self._taken("prefill", lambda: port.prefill(given, keep_intermediates=keep))
            self._finite(returned_tensors(result))
            self.port, self.prompt, self.fed = port, prompt, torch.zeros(batch, 0, dtype=torch.long)
            event(f"prefill: {len(chunks)} chunk(s)" + (", uneven" if len(set(chunks[:-1])) > 1 else ""))
            observed, lengths = Observed(), prompt.attention_mask.sum(dim=1).tolist()
            for row, length in enumerate(lengths):
                observed.add(row, length - 1, result.logits[row], "last prompt token")
            if result.all_logits is not None:  # the logits at every position (returned: judged, asked for or not)
                every = given.right_aligned(result.all_logits)
                for row, length in enumerate(lengths):
                    for position in range(length):
                        observed.add(row, position, every[row, position], "every position")
            for index, (start, chunk) in enumerate(zip(chunk_starts(chunks), chunks, strict=True)):
                for row, length in enumerate(lengths):
                    if result.chunk_logits is not None and length > start:
                        observed.add(
                            row,
                            min(start + chunk, length) - 1,
                            result.chunk_logits[index][row],
                            f"end of chunk {index}",
                        )
            self._judge(observed)
            self._judge_stages(result, given)

        @precondition(lambda self: self.prompt is not None)
        @rule(data=st.data())
        def decode(self, data: st.DataObject) -> None:
            """Decode steps (as many as reach the ring's next wrap, or any), each row at its own position;
            a row at ``max_seq`` must be refused."""
            to_wrap = int((window - self.lengths.max() % window) % window)
            steps = data.draw(near([1, to_wrap + 1, to_wrap + 2, window], 1, window + 2), label="steps")
            observed = Observed()
            for step in range(steps):
                ids = torch.tensor(data.draw(per_row(token_ids), label="ids"))[:, None]
                if int(self.lengths.max()) >= max_seq:  # judged first: a refusal may end the conversation
                    if observed.rows:
                        self._judge(observed)
                    self._refused("decode past max_seq", lambda ids=ids: self.port.decode(ids), kind="decode", ids=ids)
                    return
                self._record(op="decode", ids=ids)
                target.covered("decode")
                logits = self._taken("decode", lambda ids=ids: self.port.decode(ids))
                self._finite([(f"decode step {step}'s logits", logits)])
                for row, position in enumerate(self.lengths.tolist()):
                    observed.add(row, position, logits[row], f"decode step {step}")
                self.fed = torch.cat((self.fed, ids), dim=1)
            if observed.rows:
                self._judge(observed)

        @rule(data=st.data())
        def generate(self, data: st.DataObject) -> None:
            """Greedy generation (the port's own loop), each token HF's argmax over the history before it
            wherever HF's top-2 gap is decided (the token rule; one forward per row, teacher-forced on the
            port's own tokens); the conversation then holds the prompt and the generated tokens its cache
            keeps (every one but the last as HF's loop, or all of them: ``limits.contracts.generate_leaves``)."""
            new = data.draw(near([1, window, window + 1], 1, min(window + 2, max_seq - 1)), label="new tokens")
            if images is None:
                lengths = data.draw(per_row(near(anchors, 1, max_seq - new)), label="lengths")
                prompt = text_prompt(config, lengths, seed=sum(lengths))
            else:
                prompt = images(data, batch, data.draw(st.integers(0, 99), label="seed"))
                assume(int(prompt.attention_mask.sum(dim=1).max()) + new <= max_seq)
            target.covered("generate", int(prompt.attention_mask.sum(dim=1).max()))
            port = target.port(None)
            given = prompt.padded(data.draw(st.sampled_from(target.paddings), label="padding"))
            self._record(op="generate", prompt=given, new=new)
            try:
                ours = self._taken("generate", lambda: port.generate(given, max_new_tokens=new))
            except NotExposed:
                event("generate: not exposed")
                return
            self.port, self.prompt, self.fed = port, prompt, ours[:, : new - keeps]
            for row, length in enumerate(prompt.attention_mask.sum(dim=1).tolist()):
                logits = target.reference(self._history(row))[length - 1 : length - 1 + new]  # each step's choice
                divergence = greedy_divergence(ours[row].tolist(), logits, target.token_bound(logits))
                if divergence:
                    self._fail(f"greedy generation leaves HF's at row {row} {divergence}")

        @rule(what=st.sampled_from(["a prompt past max_seq", "an id equal to the vocabulary size"]))
        def refuse(self, what: str) -> None:
            """Calls every port must refuse (and, where it keeps its conversation, survive)."""
            if what == "a prompt past max_seq":
                prompt = text_prompt(config, [max_seq + 1] * batch, seed=7).padded(target.paddings[0])
                self._refused(what, lambda: target.port(None).prefill(prompt), kind="prefill", prompt=prompt)
            elif self.prompt is not None:
                ids = torch.full((batch, 1), target.vocab_size)  # the first id past the vocabulary
                self._refused(what, lambda: self.port.decode(ids), kind="decode", ids=ids)

    return PortMachine
