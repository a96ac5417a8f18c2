"""``stabkit.testing``: what an algorithm's author needs in a pytest suite.

* growth assertions on measured curves (:mod:`stabkit.testing.growth`): ``assert_saturates``,
  ``assert_grows``, ``assert_grows_linearly``, ``assert_below``;
* a tiny float64 problem to pin an update rule against a hand computation
  (:mod:`stabkit.testing.problems`): ``tiny_task``, ``tiny_run``, ``run_rounds``, ``grad``,
  ``local_models``, ``reference_rounds``;
* one-line checks on real paired runs (:mod:`stabkit.testing.checks`): ``assert_null_pair_zero``,
  ``assert_deterministic``, ``assert_reduces_to``.
"""
from stabkit.testing.checks import assert_deterministic, assert_null_pair_zero, assert_reduces_to
from stabkit.testing.growth import assert_below, assert_grows, assert_grows_linearly, assert_saturates
from stabkit.testing.problems import LR, K, grad, local_models, reference_rounds, run_rounds, tiny_run, tiny_task

__all__ = ["K", "LR", "assert_below", "assert_deterministic", "assert_grows", "assert_grows_linearly",
           "assert_null_pair_zero", "assert_reduces_to", "assert_saturates", "grad", "local_models",
           "reference_rounds", "run_rounds", "tiny_run", "tiny_task"]
