"""The numerical core: the damped-oscillator model of GRPO reward curves (DESIGN section 2).

Pure functions over numpy arrays: no I/O, no database, no printing.
"""
