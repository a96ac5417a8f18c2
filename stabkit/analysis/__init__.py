"""Holding runs against the papers: reads run directories, never imports the engine.

``run_analysis`` (``analyze``: fits, bounds, tightness and Libra's dynamics of one run), ``fits`` (growth
laws), ``bounds/`` (one module per paper, registered per algorithm) and ``plots`` (the figures).
"""
