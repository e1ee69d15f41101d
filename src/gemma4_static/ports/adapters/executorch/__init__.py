"""ExecuTorch's own Gemma 4 text decoder as a port (:mod:`.port`), built from its config (:mod:`.config`), in its
export's integer recipes (:mod:`.recipe`) or its PT2E XNNPACK flow (:mod:`.pt2e`)."""
