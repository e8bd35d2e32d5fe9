"""`grposcope demo` and its helpers, outside the server's import graph.

Only the demo CLI imports this package (lazily). ``bandits`` needs numpy and the plugin's
``Run``; ``trainer`` and ``tiny_grpo`` need the ``demo`` extra (torch, transformers, trl), which
a server install does not have: ``feeders`` checks for it and says how to add it.
"""
