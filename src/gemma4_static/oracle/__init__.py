"""The oracle: Hugging Face as the reference, and everything that only checks the runtime.

``hf`` (adapters that ask transformers and expand its answers), ``models`` (embedded seeded
models, local checkpoints), ``samples`` and ``layouts`` (prompts and padding patterns),
``tolerances`` (one table, with reasons), ``parity`` (each check once), ``report`` (rows, JSON),
``verify`` (the ``gemma4-static verify`` flow). The runtime never imports this package.
"""
