"""api domain."""
