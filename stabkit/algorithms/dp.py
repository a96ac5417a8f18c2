"""Client-level differential privacy (DP-FedAvg, McMahan et al., ICLR 2018) around any algorithm.

Each client's model delta ``d_i`` is clipped to norm at most ``clip`` C, ``d_i min(1, C / ||d_i||)``; the engine
averages the clipped deltas over the round's s clients (a fixed denominator: the cohort size is fixed), and the
server adds Gaussian noise of standard deviation ``noise_multiplier * C / s`` to that average before the inner
algorithm's server rule sees it (Flower's ``DifferentialPrivacyServerSideFixedClipping`` convention: noise
``z C`` on the sum, i.e. ``z C / s`` on the mean). Replacing one client changes the clipped mean by at most
``2C / s``, so one round is the Gaussian mechanism with noise ``z / 2`` times that sensitivity
(``stabkit.privacy.accountant``).

The noise is ``ctx.gaussian("dp-noise")``, the engine's counter-based standard normals: the same for both
trajectories of a pair by default (coupled: the null pair stays exactly 0 and D_T measures the algorithm), each
trajectory's own with ``--dp-noise independent`` (the decoupled runs an audit needs).

The inner algorithm must upload its model delta and nothing else: any further upload (SCAFFOLD's control
variates, MimeLite's full gradients, ...) would leave the server unclipped and un-noised, so such an algorithm
is refused by name. noise_multiplier 0 clips without noise (epsilon is infinite).
"""
from __future__ import annotations

from dataclasses import dataclass

from stabkit.algorithms.base import CLIENT_SENSITIVITIES, HParams, Wrapper, hp
from stabkit.algorithms.fedavg import FedAvg
from stabkit.errors import ConfigError


@dataclass(frozen=True)
class DPParams(HParams):
    clip: float = hp(1.0, "clipping norm C of each client's model delta", low=0.0, low_open=True)
    noise_multiplier: float = hp(1.0, "noise multiplier z: Gaussian noise of std z C / s on the mean of the "
                                 "s clipped deltas (0 = no noise, epsilon infinite)", low=0.0)


def clip_rows(d, clip: float):
    """Each client vector (last dimension) of ``d`` scaled to norm at most ``clip`` (unchanged below it)."""
    norm = d.norm(dim=-1, keepdim=True)
    return d * (clip / norm.where(norm > clip, norm.new_full((), clip)))


class DP(Wrapper):
    """``inner`` with client-level DP: clipped deltas, Gaussian noise on their mean (:class:`DPParams`);
    named ``<inner>+dp``."""

    params_cls = DPParams
    tag, tag_title = "dp", "DP"
    needs = frozenset({CLIENT_SENSITIVITIES})  # measured every round for the run's privacy.json

    def __init__(self, inner=None, params=None):
        super().__init__(inner, params)
        if self.inner.dp_params() is not None:
            raise ConfigError(f"invalid wrap='dp' around {self.inner.name}: it already adds DP noise (one DP "
                              f"layer per run: its clip and noise are what the accountant counts)")

    def dp_params(self) -> DPParams:
        return self.p

    def noise_std(self, sampled: int) -> float:
        """The standard deviation z C / s of the noise on the mean upload of s clients."""
        return self.p.noise_multiplier * self.p.clip / sampled

    def client_final(self, ctx, start, y, local):
        uploads, new_client = super().client_final(ctx, start, y, local)
        if set(uploads) != {"delta"}:
            raise ConfigError(f"invalid wrap='dp' around {self.inner.name}: its uploads "
                              f"({', '.join(sorted(uploads))}) are not only its model delta, so clipping and noise "
                              f"would not cover them; wrap an algorithm that uploads its model delta alone")
        return {"delta": clip_rows(uploads["delta"], self.p.clip)}, new_client

    def server_update(self, ctx, means):
        std = self.noise_std(ctx.sampled)
        if std:
            means = {**means, "delta": means["delta"] + std * ctx.gaussian("dp-noise")}
        return super().server_update(ctx, means)


class DPFedAvg(DP):
    """DP-FedAvg: FedAvg's local SGD, clipped deltas, Gaussian noise on their mean."""

    name = "dp_fedavg"
    title = "DP-FedAvg"
    reference = "McMahan et al. 2018, ICLR (client-level DP); noise z C / s on the mean as in Flower"
    inner_cls = FedAvg


__all__ = ["DP", "DPFedAvg", "DPParams", "clip_rows"]
