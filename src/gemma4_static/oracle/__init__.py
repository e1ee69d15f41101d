"""The oracle: Hugging Face as the reference, and everything that checks a port against it. The
runtime never imports this package. Its rooms, in the order data flows through them:

- ``references``: HF as the reference (``hf``, ``hf_vision`` adapters that ask transformers and
  expand its answers), the embedded seeded models (``models``, ``trained``), local checkpoints
  (``checkpoints``), sample prompts and padding layouts (``samples``, ``layouts``);
- ``checks``: each parity check once (``parity``, ``parity_masks``, ``parity_vision``), its
  tolerances (``tolerances``), report rows (``report``) and mask diagrams (``diagrams``);
- ``numerics``: the low-precision profiles (``metrics`` with the token rule, ``gates``,
  ``parity_numerics``, ``overflow``) and the CPU kernel sets they must hold under
  (``kernel_sets``);
- ``faults``: porting bugs injected into this project's runtime (``faults``, ``fault_patches``,
  ``catalogue``, ``catalogue_vision``) and the self-test that must catch each (``self_test``);
- ``flow``: ``gemma4-static verify`` on a port (``session``, ``verify``, ``verify_masks``,
  ``verify_steps``, ``verify_numerics``);
- ``pages``: the reports as web pages (``verify_page``; two runs compared: ``compare``,
  ``compare_page``), drawn from their JSON alone.

A new port goes in :mod:`gemma4_static.ports`; a new check in ``checks`` and, as a group, in
``flow.verify.CHECKS``.
"""

import logging

# transformers imports torchao where it is installed (the verify extra's quantization reference):
# torchao warns about every optional CUDA extension it cannot load (none is used here), and torch
# about each enum torchao registers as a pytree constant (a deprecation of theirs, not ours)
for _noisy in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_noisy).setLevel(logging.ERROR)
