"""fits domain: refits of a run's reward (and eval) series, stored as snapshots."""
