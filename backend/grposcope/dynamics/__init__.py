"""The numerical core: the damped-oscillator model of GRPO reward curves (docs/model.md §2).

Pure functions over numpy arrays: no I/O, no database, no printing.
"""
