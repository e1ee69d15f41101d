"""The commands: everything that prints or sets an exit code. The ``gemma4-static`` command line
(:mod:`.cli`, its subcommands :mod:`.verify`, :mod:`.export`, :mod:`.fuzz`, :mod:`.sensitivity`,
:mod:`.self_test`, their shared progress and exit codes in :mod:`.output`) and the pytest plugin
(:mod:`.pytest_plugin`, its items in :mod:`.pytest_items`)."""
