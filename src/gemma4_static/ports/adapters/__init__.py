"""Other projects' Gemma 4 runtimes as ports, one folder each, each reading as the capabilities it
really has: ExecuTorch's Gemma 4 example (:mod:`.executorch`), Qualcomm's static QNN Gemma 4
(:mod:`.qnn`) and Samsung TICO's static Gemma 4 runtime (:mod:`.tico`). Each is imported only when
asked for by name (:mod:`..registry`): its own dependencies stay optional extras."""
