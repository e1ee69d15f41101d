"""The prompt a port receives: what its ``prefill`` and ``generate`` take (no PIL or HF needed)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch


@dataclass(frozen=True)
class Prompt:
    """A padded batch as a processor returns it (``(B, S)`` ids and 0/1 mask), optionally with
    images: image ``i`` of a row fills ``[start, start + tokens)`` of ``image_slots[i]`` (counted from
    the row's first valid token), and ``pixel_values`` holds one entry per image, row by row, as HF's
    processor orders them. ``padding_side`` is ``"right"`` (valid tokens first, the default) or
    ``"left"`` (valid tokens last, as a processor with ``padding_side="left"`` returns them).

    This is what a port's ``prefill`` and ``generate`` receive: ``input_ids (B, S)`` int64,
    ``attention_mask (B, S)`` 0/1, ``pixel_values (N, P, 3 p^2)`` and ``image_position_ids (N, P, 2)``
    (``None`` for text; one entry per image, patches padded with position ``(-1, -1)``),
    ``image_slots``, ``filled_slots`` (per row and slot whether it holds an image; ``None``: all, when
    there are images), ``mm_token_type_ids`` (1 on image placeholders) and ``last_index``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    pixel_values: torch.Tensor | None = None
    image_position_ids: torch.Tensor | None = None
    image_slots: tuple[tuple[int, int], ...] = ()
    filled_slots: tuple[tuple[bool, ...], ...] | None = None  # per row and slot (None: all, with images)
    padding_side: str = "right"

    @property
    def filled(self) -> torch.Tensor:
        """``(B, slots)`` bool: which slots of each row hold an image (the others hold text)."""
        rows = self.input_ids.shape[0]
        if self.pixel_values is None:
            return torch.zeros(rows, len(self.image_slots), dtype=torch.bool)
        if self.filled_slots is None:
            return torch.ones(rows, len(self.image_slots), dtype=torch.bool)
        return torch.tensor(self.filled_slots, dtype=torch.bool).view(rows, len(self.image_slots))

    @property
    def mm_token_type_ids(self) -> torch.Tensor:
        """``1`` on image placeholders, as HF's processor returns it."""
        types = torch.zeros_like(self.input_ids)
        for index, (start, count) in enumerate(self.image_slots):
            types[:, start : start + count] = self.filled[:, index, None].long()
        return types.gather(1, self._shift(-1)) if self.padding_side == "left" else types

    def _shift(self, direction: int) -> torch.Tensor:
        """``(B, S)`` gather index moving each row's valid tokens to the right end (``direction``
        ``-1``, from a right-padded layout) or back to the left end (``+1``)."""
        length = self.input_ids.shape[1]
        shift = length - self.attention_mask.sum(dim=1)
        return (torch.arange(length)[None, :] + direction * shift[:, None]) % length

    def left_padded(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``input_ids`` and ``attention_mask`` with every row's valid tokens moved to the right end,
        as a processor with ``padding_side="left"`` returns them."""
        if self.padding_side == "left":
            return self.input_ids, self.attention_mask
        index = self._shift(-1)
        return self.input_ids.gather(1, index), self.attention_mask.gather(1, index)

    def padded(self, side: str | None) -> Prompt:
        """This (right-padded) prompt laid out for ``side`` (``"left"``; ``"right"`` or ``None``: as it is)."""
        if side != "left" or self.padding_side == "left":
            return self
        ids, mask = self.left_padded()
        return replace(self, input_ids=ids, attention_mask=mask, padding_side="left")

    def right_aligned(self, values: torch.Tensor) -> torch.Tensor:
        """Per-position ``values (B, S, ...)`` of this prompt's layout with each row's valid positions
        first (the right-padded layout the checks compare in); unchanged for a right-padded prompt."""
        if self.padding_side != "left":
            return values
        index = self._shift(1).reshape(*index_shape(values))
        return values.gather(1, index.expand(-1, -1, *values.shape[2:]))

    def laid_out(self, values: torch.Tensor) -> torch.Tensor:
        """Per-position ``values (B, S, ...)`` with each row's valid positions first (the layout a static
        runtime computes in) laid out as this prompt is: the inverse of :meth:`right_aligned`."""
        if self.padding_side != "left":
            return values
        index = self._shift(-1).reshape(*index_shape(values))
        return values.gather(1, index.expand(-1, -1, *values.shape[2:]))

    def row(self, index: int) -> Prompt:
        """Row ``index`` alone, without its padding (what a batch-1 caller would pass)."""
        valid = self.attention_mask[index].bool()
        counts = self.filled.sum(dim=1)
        images = slice(int(counts[:index].sum()), int(counts[: index + 1].sum()))  # empty for a text row
        slots = tuple(
            slot for slot, filled in zip(self.image_slots, self.filled[index].tolist(), strict=True) if filled
        )
        return Prompt(
            input_ids=self.input_ids[index][valid][None],
            attention_mask=self.attention_mask[index][valid][None],
            pixel_values=self.pixel_values[images] if slots else None,
            image_position_ids=self.image_position_ids[images] if slots else None,
            image_slots=slots,
        )

    def text_positions(self, row: int) -> list[int]:
        """The positions of row ``row`` (right-padded) that hold text: past its first token, outside
        each image it holds and the ``boi``/``eoi`` around it."""
        framed = {
            position
            for (start, count), image in zip(self.image_slots, self.filled[row].tolist(), strict=True)
            if image
            for position in range(start - 1, start + count + 1)
        }
        return [position for position in range(1, int(self.attention_mask[row].sum())) if position not in framed]

    def hf_kwargs(self) -> dict[str, torch.Tensor]:
        """The keyword arguments an HF Gemma 4 forward or ``generate`` takes for this prompt."""
        kwargs = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        if self.pixel_values is not None:
            kwargs.update(
                pixel_values=self.pixel_values,
                image_position_ids=self.image_position_ids,
                mm_token_type_ids=self.mm_token_type_ids,
            )
        return kwargs

    @property
    def last_index(self) -> torch.Tensor:
        """``(B,)`` index of each row's last valid token."""
        if self.padding_side == "left":
            return torch.full((self.input_ids.shape[0],), self.input_ids.shape[1] - 1)
        return self.attention_mask.sum(dim=1) - 1


def index_shape(values: torch.Tensor) -> tuple[int, ...]:
    """``(B, S, 1, ...)``: a ``(B, S)`` index viewed to broadcast over ``values``' trailing dims."""
    return (values.shape[0], values.shape[1], *([1] * (values.dim() - 2)))
