"""Flatness and sharpness of global (and client) models, measured as the FedSWA paper argues through them.

* ``objective``: a weighted training loss of many models at once (loss, gradient, Hessian-vector product);
* ``hessian``: Lanczos top eigenvalues with convergence, Hutchinson trace with its standard error;
* ``sharpness``: SAM sharpness by projected ascent, average-direction sharpness (Monte Carlo);
* ``settings``: what ``stabkit sharpness`` and ``stabkit landscape`` measure (``SharpnessSettings``,
  ``LandscapeSettings``) and the saved run they read, checked without torch (a refusal in well under 1 s);
* ``measure``: all scalar measures of a batch of models;
* ``runlog``: ``--sharpness-rounds``, measured during a paired run (``RUN/sharpness.csv``);
* ``saved``: ``stabkit sharpness`` on a run's saved models;
* ``directions``, ``surfaces``, ``landscape``, ``plots``: ``stabkit landscape`` (L1, L2, the paired slice; the
  clients of a round replayed by ``stabkit.run.replay``);
* ``claims`` and ``report``: the verdicts on the paper's flatness claims F1-F4 and the flatness part of a
  sweep's report.

It needs the model and the data, so it sits above the engine; ``analysis`` does not import it.
"""
