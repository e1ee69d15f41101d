"""A run's session: what it judges (:mod:`.port_under_test`: the port with every option of the run
bound), its sample prompt and setup (:mod:`.sample_plan`), an integer profile's both sides and
calibration (:mod:`.calibration`), how the suite calls a port and whose error an exception is
(:mod:`.port_calls`), and the session the check groups read (:mod:`.session`)."""
