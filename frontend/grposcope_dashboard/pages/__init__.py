"""Dashboard pages; each registers itself with ``dash.register_page`` when imported."""
