"""The oracle: Hugging Face as the reference, and everything that only checks the runtime.

``hf`` and ``hf_vision`` (adapters that ask transformers and expand its answers), ``models`` and
``trained`` (embedded seeded models whose weights look trained), ``checkpoints`` (local real
checkpoints), ``samples`` and ``layouts`` (prompts and padding patterns), ``tolerances`` (one
table, with reasons), ``parity`` and ``parity_vision`` (each check once), ``report`` (rows, JSON),
``verify`` (the ``gemma4-static verify`` flow). The runtime never imports this package.
"""
