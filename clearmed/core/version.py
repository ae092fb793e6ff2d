"""The package's version, in the ground: run folders, reports and artifacts stamp what wrote them with it, and
every layer may import this module. `clearmed.__version__` is the same string, re-exported by the package face,
which imports upward (the public API) and so is no module's dependency."""

__version__ = "0.2.0"
