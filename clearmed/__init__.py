"""clearmed: cross-source evidence adjudication for medical QA, as a DSPy program."""

from pathlib import Path

__version__ = "0.1.0"

# Run from the checkout (`python -m pytest` and `python -c` put it first on sys.path), Python finds this folder
# as `clearmed` before the installed package, and the subpackages installed from the top-level folders
# (`programs/`, `signatures/`, ... : pyproject's package-dir) would be missing. They are the folders beside this
# one, so the checkout joins the package path. Installed (a wheel, or the strict editable link tree), the parent
# folder holds no `signatures/` and nothing changes.
_CHECKOUT = Path(__file__).parent.parent
if (_CHECKOUT / "signatures" / "__init__.py").is_file() and str(_CHECKOUT) not in __path__:
    __path__.append(str(_CHECKOUT))
