"""The fit worker: claims dirty runs, refits them, evaluates diagnostics, raises alerts."""
