"""Ports: Gemma 4 implementations seen through one interface (:mod:`.base`), found by name (:mod:`.registry`):
this project's runtime (:mod:`.static`), ExecuTorch's Gemma 4 (:mod:`.executorch_gemma4`) and Qualcomm's static
QNN Gemma 4 (:mod:`.qnn_gemma4`), with helpers for adapters (:mod:`.checkpoint_layout`, :mod:`.hooks`)."""
