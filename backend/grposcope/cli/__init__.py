"""The `grposcope` console script."""
