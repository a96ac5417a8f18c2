"""Privacy beside stability: the accountant's epsilon of a DP run's schedule (``accountant``), the epsilon the
run's measured per-instance sensitivities spend (``accountant.epsilons`` with ``dp_sensitivity``), the audit's
lower bound (``audit``) and the report of a run (``report``). Accounting uses Google's ``dp-accounting``
(the ``privacy`` extra), imported on use."""
