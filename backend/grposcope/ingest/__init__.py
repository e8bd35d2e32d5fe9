"""ingest domain."""
