"""Flatness and sharpness of global (and client) models: the FedSWA paper's landscape procedure (fedswa.md §3.9).

* ``objective``: a weighted training loss of many models at once (loss, gradient, Hessian-vector product);
* ``hessian``: Lanczos top eigenvalues with convergence, Hutchinson trace with its standard error;
* ``sharpness``: SAM sharpness by projected ascent, average-direction sharpness (Monte Carlo);
* ``measure``: all scalar measures of a batch of models (``SharpnessSettings`` records every choice);
* ``runlog``: ``--sharpness-rounds``, measured during a paired run (``RUN/sharpness.csv``);
* ``directions``, ``surfaces``, ``replay``, ``landscape``, ``plots``: ``stabkit landscape`` (L1, L2, the paired slice);
* ``claims``: the verdicts on the paper's flatness claims F1-F4 from a sweep's jobs.

It needs the model and the data, so it sits beside the engine; ``analysis`` does not import it.
"""
