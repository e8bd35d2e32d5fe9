"""grposcope's web dashboard: a Dash app that reads only the public HTTP API (docs/api.md)."""
