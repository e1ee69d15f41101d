"""The one Hugging Face adapter: every HF attribute name the runtime reads appears in this package.

``config``: a Gemma 4 text config as a frozen :class:`TextConfigView` (masks, RoPE, cache).
``model``: an HF Gemma 4 model as a :class:`ModelSpec` and the weights of each stage (``weights``); ``vision``:
its vision tower as a :class:`VisionSpec` and :class:`VisionWeights`. Nothing here
imports ``transformers``: the runtime reads HF objects, it does not depend on HF's code.
"""

from .config import (
    FULL_ATTENTION,
    LAYER_TYPES,
    SLIDING_ATTENTION,
    LayerTypeSpec,
    RopeSpec,
    TextConfigView,
    read_text_config,
)
from .model import ModelSpec, model_class, read_model, text_module
from .vision import ClippedLinear, VisionLayerWeights, VisionSpec, VisionWeights
from .weights import DecoderWeights, ExpertWeights, ModelWeights, PerLayerEmbeddingWeights, PerLayerInputWeights

__all__ = [
    "FULL_ATTENTION",
    "LAYER_TYPES",
    "SLIDING_ATTENTION",
    "ClippedLinear",
    "DecoderWeights",
    "ExpertWeights",
    "LayerTypeSpec",
    "ModelSpec",
    "ModelWeights",
    "PerLayerEmbeddingWeights",
    "PerLayerInputWeights",
    "RopeSpec",
    "TextConfigView",
    "VisionLayerWeights",
    "VisionSpec",
    "VisionWeights",
    "model_class",
    "read_model",
    "read_text_config",
    "text_module",
]
