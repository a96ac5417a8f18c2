"""Holding runs against the papers: reads run directories, never imports the engine.

``run_analysis`` (``analyze``: fits, bounds, tightness and Libra's dynamics of one run), ``fits`` (growth
laws), ``excess_risk`` (Libra's excess-risk dynamics, its minimum round and regime, the phi-fit), ``labels``
(the names of runs in legends), ``bounds/`` (one module per paper, registered per algorithm) and ``plots``
(the figures).
"""
