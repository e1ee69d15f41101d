"""The oracle: Hugging Face as the reference, and the judge of a port against it. The runtime never
imports this package. Its rooms, from the bottom (the import contract ``oracle rooms`` in
``pyproject.toml`` keeps them so):

- ``results``: report rows and statuses, tolerances, the verdict and exit codes, the report's JSON;
- ``shards`` (one run split over machines) and ``pages`` (the reports as web pages);
- ``references``: HF as the reference (adapters that ask transformers and expand its answers), the
  embedded seeded models, local checkpoints, sample prompts, recorded references;
- ``numerics``: the low-precision and integer profiles (the token rule, gates, overflow, kernel sets,
  HF quantized by torchao);
- ``checks``: each parity check once;
- ``options``: :class:`~.options.VerifyOptions`, every option of a run;
- ``session``: the port under test with the run's options bound, the sample plan, the session;
- ``episodes``: a port's history judged against HF (the grid's cases, the fuzzer's episodes);
- ``groups`` (the check groups, one file each, :data:`~.groups.GROUPS` the one table) and ``fuzz``;
- ``flow``: ``verify`` over the groups, shards merged, the sensitivity sweep;
- ``faults``: porting bugs injected into this runtime, and the self-test that must catch each.

A new port goes in :mod:`gemma4_static.ports`; a new check group is one new file of ``groups``.
"""

import logging

# transformers imports torchao where it is installed (the verify extra's quantization reference):
# torchao warns about every optional CUDA extension it cannot load (none is used here), and torch
# about each enum torchao registers as a pytree constant (a deprecation of theirs, not ours)
for _noisy in ("torchao", "torch.utils._pytree"):
    logging.getLogger(_noisy).setLevel(logging.ERROR)
