"""The package version (one place; ``hpd_agent.__version__`` re-exports it)."""

__version__ = "0.1.0"
