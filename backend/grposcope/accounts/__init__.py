"""accounts domain."""
