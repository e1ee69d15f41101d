"""The suite's root: offline always, and its plugins (``tests/lanes.py``: the lanes, declared once;
``tests/suite.py``: its house rules and summary; pytester for the plugin's own sessions). The models
are ``tests/conftest.py``'s; each folder's fixtures are its own ``conftest.py``'s."""

import os

# Offline always: set before transformers is imported anywhere in the test session.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

pytest_plugins = ("pytester", "tests.lanes", "tests.suite")
