"""Package discovery for the one `coral-engine` distribution (metadata is in pyproject.toml).

The folders keep their design names (cli/, plugins/) but install under names that cannot
clash with other distributions: cli -> coral_cli, plugins -> coral_plugins. Every package
below each root (a folder with an __init__.py) is found, so a new subpackage needs no list.
"""

from setuptools import find_packages, setup

ROOTS = {"coral_core": "coral_core", "coral_cli": "cli", "coral_plugins": "plugins"}


def packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        found += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
    return found


setup(package_dir=ROOTS, packages=packages())
