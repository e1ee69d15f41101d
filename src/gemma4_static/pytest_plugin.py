"""The pytest plugin's documented import path (``pytest -p gemma4_static.pytest_plugin``); the plugin
itself is :mod:`gemma4_static.commands.pytest_plugin`, registered as this package's pytest11 entry point."""

from .commands.pytest_plugin import *  # noqa: F403
from .commands.pytest_plugin import __all__  # noqa: F401
