"""NPU side: fixed-shape ``nn.Module`` stages that hold only weights, each declaring example inputs
at its static shapes for export. Nothing here imports ``transformers`` or the CPU side."""

from .decoder import DecoderLayer
from .embedding import PerLayerInputs, TokenEmbedding
from .fusion import FixedSlotFusion
from .lm_head import LMHead
from .stages import Stages, build_stages
from .vision import VisionEncoder

__all__ = [
    "DecoderLayer",
    "FixedSlotFusion",
    "LMHead",
    "PerLayerInputs",
    "Stages",
    "TokenEmbedding",
    "VisionEncoder",
    "build_stages",
]
