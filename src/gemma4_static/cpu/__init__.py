"""CPU side: everything dynamic, as plain tensors in and out (no ``nn.Module``, no ``transformers``).

``checks`` (argument checks of the public entry points), ``layout`` (the static shapes: length,
batch, image slots), ``inputs`` (each row's tokens first, padding, validation), ``images`` (images
checked and placed into their slots' vision calls), ``rules`` and ``masks`` (attention masks per
layer type), ``rope`` (cos/sin tables per layer type), ``cache`` (static KV buffers, ring or
max_seq layout, each row's length), ``vision`` (the vision stage's key-padding mask, axial 2-D
RoPE and pooling matrix).
"""
