"""A plug-in algorithm whose module registers a bound with the wrong signature (importing it must fail with
one line naming the bound)."""
from stabkit.algorithms import Algorithm
from stabkit.analysis.bounds import register


class WithBadBound(Algorithm):
    name = "with_bad_bound"


@register("with_bad_bound", name="bad.signature")
def bound(setting, extra):
    return []
