"""Reusable pieces of the pages: navbar, stat cards, tooltips, empty states, run panels."""
