"""The verification flow: a session on a port, and the check groups of ``gemma4-static verify``."""
