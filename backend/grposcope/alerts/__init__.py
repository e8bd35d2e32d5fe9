"""alerts domain: alert lifecycle, per-project rule overrides, webhooks and their delivery."""
