"""grposcope: watch GRPO runs live and predict them."""

__version__ = "0.1.0"
