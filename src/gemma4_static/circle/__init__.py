"""Circle, the graph format of Samsung's ONE toolchain: a stage converted with TICO (``tico.convert``)
and executed by ONE's runtime (``onert``), the ``circle`` extra."""
