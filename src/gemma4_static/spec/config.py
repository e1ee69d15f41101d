"""Gemma 4 text config -> :class:`TextConfigView`: what masks, RoPE and the KV cache read.

Configs are recognised by their fields (``layer_types``, ``per_layer_config``), never by importing
``transformers``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LAYER_TYPES = (FULL_ATTENTION, SLIDING_ATTENTION)
ROPE_TYPES = ("default", "proportional")


@dataclass(frozen=True)
class RopeSpec:
    """RoPE parameters of one layer type, resolved against that type's head dim."""

    rope_type: str
    theta: float
    head_dim: int
    partial_rotary_factor: float = 1.0
    factor: float = 1.0


@dataclass(frozen=True)
class LayerTypeSpec:
    """Attention geometry shared by every layer of one type."""

    head_dim: int
    num_kv_heads: int
    rope: RopeSpec


@dataclass(frozen=True)
class TextConfigView:
    """What masks, RoPE and the KV cache need from a ``Gemma4TextConfig``.

    ``sliding_window`` is HF's stored value: for ``use_bidirectional_attention == "all"`` HF has
    already converted it to the exclusive half-width ``window // 2 + 1``.
    """

    layer_types: tuple[str, ...]
    type_specs: tuple[tuple[str, LayerTypeSpec], ...]
    sliding_window: int
    use_bidirectional_attention: str | None
    kv_sharing_modes: tuple[str | None, ...]
    max_position_embeddings: int

    def spec(self, layer_type: str) -> LayerTypeSpec:
        """The geometry of ``layer_type``; ``ValueError`` if the model has no such layer."""
        for name, spec in self.type_specs:
            if name == layer_type:
                return spec
        raise ValueError(
            f"layer_type={layer_type!r} is not used by this model; expected one of {self.unique_layer_types}"
        )

    @property
    def unique_layer_types(self) -> tuple[str, ...]:
        """Layer types present in the model, in canonical order (full, then sliding)."""
        return tuple(name for name, _ in self.type_specs)

    @property
    def kv_sources(self) -> tuple[int, ...]:
        """For each layer, the index of the layer whose K/V it attends over (itself unless it reuses).

        A ``reuse`` layer reads the K/V stored by the last ``store`` layer of its own type.
        """
        stores = {self.layer_types[i]: i for i, mode in enumerate(self.kv_sharing_modes) if mode == "store"}
        return tuple(
            stores[layer_type] if mode == "reuse" else i
            for i, (layer_type, mode) in enumerate(zip(self.layer_types, self.kv_sharing_modes, strict=True))
        )


def read_text_config(config: Any) -> TextConfigView:
    """Read a ``Gemma4TextConfig`` (or a ``Gemma4Config``, via its text config) into a view.

    Raises ``TypeError`` for an object that is not a Gemma 4 config and ``ValueError`` naming the
    field for values the runtime does not support.
    """
    if isinstance(config, TextConfigView):
        return config
    if hasattr(config, "get_text_config") and not hasattr(config, "layer_types"):
        config = config.get_text_config()
    if not hasattr(config, "layer_types") or not hasattr(config, "per_layer_config"):
        raise TypeError(f"text_config must be a Gemma4TextConfig or Gemma4Config, got {type(config).__name__}")

    layer_types = tuple(config.layer_types)
    unknown = sorted({t for t in layer_types if t not in LAYER_TYPES})
    if unknown:
        raise ValueError(f"layer_types contains unsupported values {unknown}; expected only {list(LAYER_TYPES)}")

    sliding_window = config.sliding_window
    if SLIDING_ATTENTION in layer_types and (not isinstance(sliding_window, int) or sliding_window < 1):
        raise ValueError(f"sliding_window must be an integer >= 1, got {sliding_window!r}")

    present = tuple(t for t in LAYER_TYPES if t in layer_types)
    return TextConfigView(
        layer_types=layer_types,
        type_specs=tuple((t, _read_layer_type(config, t)) for t in present),
        sliding_window=int(sliding_window),
        use_bidirectional_attention=config.use_bidirectional_attention,
        kv_sharing_modes=tuple(config.kv_sharing_modes),
        max_position_embeddings=int(config.max_position_embeddings),
    )


def _read_layer_type(config: Any, layer_type: str) -> LayerTypeSpec:
    per_type = config.per_layer_config[layer_type]
    head_dim = int(per_type.head_dim)
    rope_parameters = (config.rope_parameters or {}).get(layer_type)
    if rope_parameters is None:
        raise ValueError(f"rope_parameters[{layer_type!r}] is missing; every layer type needs RoPE parameters")
    return LayerTypeSpec(
        head_dim=head_dim,
        num_kv_heads=int(per_type.num_key_value_heads),
        rope=_read_rope(rope_parameters, layer_type, head_dim),
    )


def _read_rope(params: dict[str, Any], layer_type: str, head_dim: int) -> RopeSpec:
    field = f"rope_parameters[{layer_type!r}]"
    rope_type = params.get("rope_type")
    if rope_type not in ROPE_TYPES:
        raise ValueError(f"{field}['rope_type']={rope_type!r} is not supported; expected one of {list(ROPE_TYPES)}")
    theta = params.get("rope_theta")
    if not isinstance(theta, int | float) or theta <= 0:
        raise ValueError(f"{field}['rope_theta'] must be a positive number, got {theta!r}")
    # HF's default RoPE ignores `factor` and `partial_rotary_factor`; only proportional RoPE reads them.
    factor, partial = 1.0, 1.0
    if rope_type == "proportional":
        factor = params.get("factor", 1.0)
        if not isinstance(factor, int | float) or factor <= 0:
            raise ValueError(f"{field}['factor'] must be a positive number, got {factor!r}")
        partial = params.get("partial_rotary_factor", 1.0)
        if not isinstance(partial, int | float) or not 0.0 <= partial <= 1.0:
            raise ValueError(f"{field}['partial_rotary_factor'] must be in [0, 1], got {partial!r}")
    return RopeSpec(rope_type, float(theta), head_dim, float(partial), float(factor))
