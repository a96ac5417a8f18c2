"""Federated unlearning measured against the exact coupled retrain (``stabkit unlearn``).

A ``--perturb remove-client`` run's trajectory B is the model retrained without client i* under the same
initialisation, cohorts and minibatches as A: the variance-minimal retraining reference. An unlearning
method starts from A's final model x_T^A and is judged by ||x_u - x_T^B||, against doing nothing
(||x_T^A - x_T^B||) and against the retraining noise floor (retrains of B that differ only in their seed).

Modules: ``base`` (the method interface, :class:`UnlearningMethod`, and what a method returns), ``context``
(:class:`UnlearnContext`: what a method may use: the run's models, rounds of its algorithm on the remaining
clients, plain local SGD, the stored client updates), ``methods`` (the built-in methods ``none``,
``finetune``, ``gradient-ascent``, ``federaser``, and resolving a plug-in), ``floor`` (the retraining noise
floor) and ``measure`` (:func:`unlearn`: one method on one run, the per-pair report).
"""
from stabkit.unlearn.base import Unlearned, UnlearningMethod
from stabkit.unlearn.measure import unlearn

__all__ = ["Unlearned", "UnlearningMethod", "unlearn"]
