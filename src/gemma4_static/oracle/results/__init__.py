"""What a check results in: report rows and their statuses (:mod:`.report`), the float32 tolerances
(:mod:`.tolerances`), the verdict over a run's rows and the exit codes (:mod:`.verdict`), the report
as strict JSON under its shipped schema (:mod:`.report_json`), and what a report draws beside the
rows (:mod:`.figures`, :mod:`.diagrams`). It knows nothing of a port, of HF or of a run."""
