"""Samsung TICO's static Gemma 4 runtime as a port (:mod:`.port`): its prompts through a processor stand-in
(:mod:`.inputs`), its PTQ schemes (:mod:`.quant`), its graphs (:mod:`.graphs`), its own verification flow
(:mod:`.flow`) and the divergences its own code accounts for (:mod:`.scope`)."""
