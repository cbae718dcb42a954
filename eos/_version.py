"""The version of eos, in one place (pyproject.toml reads it from here, without importing eos)."""

__version__ = "0.3.0.dev0"
