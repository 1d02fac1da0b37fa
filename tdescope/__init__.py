"""tdescope: a workbench for looking inside database encryption while it happens."""

__all__ = ["__version__"]

__version__ = "0.1.0"
