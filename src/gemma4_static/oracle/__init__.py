"""The oracle: Hugging Face as the reference, and everything that only checks the runtime.

``hf`` and ``hf_vision`` (adapters that ask transformers and expand its answers), ``models`` and
``trained`` (embedded seeded models whose weights look trained), ``checkpoints`` (local real
checkpoints), ``samples`` and ``layouts`` (prompts and padding patterns), ``tolerances`` (one
table, with reasons), ``parity``, ``parity_masks`` and ``parity_vision`` (each check once),
``diagrams`` (mask mismatches drawn), ``metrics``, ``gates``, ``parity_numerics`` and ``overflow``
(the low-precision profiles against float64), ``report`` (rows, JSON), ``session``, ``verify``,
``verify_masks`` and ``verify_numerics`` (the ``gemma4-static verify`` flow), ``faults``,
``fault_patches``, ``catalogue``, ``catalogue_vision`` and ``self_test`` (porting bugs injected
in-process, ``verify --self-test``). The runtime never imports this package.
"""
