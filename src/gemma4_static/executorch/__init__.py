"""Everything ExecuTorch: the backends by name (:mod:`.backends`, the one place that reads one), the
one lowering pipeline (:mod:`.lowering`: ``torch.export`` with the delegable decompositions of
:mod:`.decompositions`, XNNPACK, the emitter) and the one cache of its programs
(:mod:`.program_cache`), the stage programs (:mod:`.stage_programs`), the text model as one program
with its KV cache inside (:mod:`.cached_stack`, :mod:`.cache_program`, the CPU side of its steps in
:mod:`.step_inputs`), XNNPACK's quantization (:mod:`.xnnpack_quant`) and the deployable bundle
(:mod:`.bundle`). ``executorch`` (the extra ``gemma4-static[executorch]``) is imported only when a
program is lowered or loaded."""
