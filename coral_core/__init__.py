"""Coral: a plugin-based engine that scores code models honestly.

The core is deliberately small: hook specifications, the plugin manager, value types,
configuration, the run store, the runner, metrics and the sandbox. Everything a user can
name (data sets, models, evaluators, search strategies, experiments) is a plugin.
"""

__version__ = "0.1.0"
