"""A port's history judged against HF, shared by the schedules grid, the long context and the
fuzzer: the boundaries a history crosses (:mod:`.boundaries`: prompt lengths, chunk schedules and
decode steps around the window), a case of the grid (:mod:`.cases`: a prompt fed in a schedule,
then decode steps), and the judgement of what a port returned against HF's forward over the same
tokens (:mod:`.judgement`), scored per profile (:mod:`.scores`)."""
