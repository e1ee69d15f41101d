"""CPU side: everything dynamic, as plain tensors in and out (no ``nn.Module``, no ``transformers``).

``checks`` (argument checks of the public entry points), ``inputs`` (layout, right padding,
validation), ``rules`` and ``masks`` (attention masks per layer type), ``rope`` (cos/sin tables per
layer type), ``cache`` (static KV buffers, ring or max_seq layout, each row's length), ``vision``
(the vision stage's key-padding mask, axial 2-D RoPE and pooling matrix, image checks).
"""
