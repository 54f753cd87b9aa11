"""The real libraries the mutation tests and benchmarks/mutation.py run on, as their source
distributions lay them out (pip downloads them), chosen for their layouts: python-slugify
(a package whose `__init__` star-imports the module, relative imports, unittest subTest,
a CLI run in subprocesses), semver (src/ layout, conftest.py, `--import-mode=importlib`,
`pythonpath` and pytest-cov in its ini, decorator-made closures), humanize (src/ layout,
`filterwarnings = error`, `from __future__ import annotations`), ordered-set (a flat
package, doctests in its ini), inflection (the module is a package's `__init__`, its one
test file lies beside the package, nearly every test parametrized)."""

from __future__ import annotations

from dataclasses import dataclass

# Test dependencies of the libraries' suites, pinned, without their own dependencies.
DEPS = ["text-unidecode==1.3", "freezegun==1.5.5", "python-dateutil==2.9.0.post0",
        "six==1.17.0", "pytest-cov==7.1.0"]


@dataclass(frozen=True)
class Library:
    requirement: str
    folder: str  # what the sdist unpacks to
    module: str  # the module mutated
    tests: tuple[str, ...]
    pythonpath: tuple[str, ...]  # besides DEPS
    sample: float  # the share of mutants the parity test runs
    mutmut_copy: tuple[str, ...] = ()  # what mutmut 3 must copy beside its mutants (also_copy)

    @property
    def package(self) -> str:
        """The module's folder: what mutmut 3 mutates (it takes folders)."""
        return self.module.rsplit("/", 1)[0] + "/"


LIBRARIES = {library.requirement.split("==")[0]: library for library in [
    Library("python-slugify==9.2.0", "python_slugify-9.2.0", "slugify/slugify.py",
            ("tests",), (".",), 0.05,
            ("tools/", "README.md", "docs/", "CHANGELOG.md", "setup.py")),  # tests read them
    Library("semver==3.1.2", "semver-3.1.2", "src/semver/version.py", ("tests",), (), 0.05),
    Library("humanize==4.17.0", "humanize-4.17.0", "src/humanize/number.py",
            ("tests/test_number.py",), ("src",), 0.05),
    Library("ordered-set==4.1.0", "ordered-set-4.1.0", "ordered_set/__init__.py", ("test",),
            (), 0.15),
    Library("inflection==0.5.1", "inflection-0.5.1", "inflection/__init__.py",
            ("test_inflection.py",), (".",), 0.05),
]}
