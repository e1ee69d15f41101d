"""References: HF as the oracle (adapters), the embedded seeded models, checkpoints, sample prompts and layouts."""
