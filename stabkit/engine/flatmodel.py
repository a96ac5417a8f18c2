"""A ``torch.nn.Module`` run functionally on flat parameter vectors, batched over clients.

Per-client state, averaging and ||x - x'|| are single tensor ops on flat vectors ``[..., d]``; the
module is only a shape template evaluated with ``torch.func.functional_call``. ``grads`` computes the
minibatch-loss gradients of many clients at once with ``vmap(grad(...))`` (no Python loop over
clients); ``evaluate`` gives per-sample losses, correctness and the gradient of a weighted full-data
loss for several models on shared data. Models made of the layers ``stabkit.engine.layers`` knows take a
fast path instead: Sequential stacks (logistic, MLP, linear, the CNNs, LeNet-5, VGG-11) a hand-written
batched backward (``stabkit.engine.seqgrad``), other traceable modules (ResNet-18-GN) the grouped model
(``stabkit.engine.grouped``): same numbers, a fraction of the overhead.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.func import functional_call, grad, grad_and_value, vmap

from stabkit.engine.cudagraph import GraphedCall, graphs_enabled
from stabkit.engine.grouped import GroupedModel, compile_grouped
from stabkit.engine.seqgrad import SeqGrad, compile_seq

EVAL_BYTES = 512 << 20  # activation memory one evaluation chunk may take (all models together)


class FlatModel:
    """Shape template + loss for flat parameter vectors of dimension ``d``."""

    def __init__(self, module: torch.nn.Module, kind: str, dtype: torch.dtype, device: torch.device):
        self.module = module.to(dtype=dtype, device=device)
        self.kind = kind
        params = dict(self.module.named_parameters())
        self.names = list(params)
        self.shapes = [p.shape for p in params.values()]
        self.numels = [p.numel() for p in params.values()]
        self.d = sum(self.numels)
        self.dtype, self.device = dtype, device
        # the hand-written Sequential path, else the traced grouped model; None: the generic torch.func path
        self.fast = compile_seq(self.module, kind) or compile_grouped(self.module, kind)
        self._graphed = None  # on CUDA: the fast path's minibatch gradient replayed from captured graphs
        self._flops = None
        self._activation_bytes = None  # per sample and model, measured on first evaluation
        self._batched_grad = vmap(grad(self._batch_loss))
        self._batched_grad_weighted = vmap(grad(self._weighted_loss))
        self._eval = vmap(grad_and_value(self._eval_loss, has_aux=True), in_dims=(0, None, None, 0))
        self._eval_own = vmap(grad_and_value(self._eval_loss, has_aux=True))
        self._forward_losses = vmap(self._losses, in_dims=(0, None, None))
        self._per_sample = vmap(grad(self._sample_loss), in_dims=(None, 0, 0))

    def flatten(self) -> torch.Tensor:
        """The module's current parameters as one flat vector."""
        return torch.cat([p.detach().reshape(-1) for p in self.module.parameters()])

    def unflatten(self, theta: torch.Tensor) -> dict:
        return {n: t.view(s) for n, t, s in zip(self.names, torch.split(theta, self.numels), self.shapes)}

    def flops_per_sample(self, x1: torch.Tensor, y1: torch.Tensor) -> float:
        """FLOPs of one sample's loss forward + backward, counted from the op shapes (matmul/conv) by
        ``torch.utils.flop_counter`` on ``x1 [1, ...]``, ``y1 [1]`` (by the ``Sequential`` fast path from its
        layer shapes, the same count); cached after the first call."""
        if self._flops is None and isinstance(self.fast, SeqGrad):
            self._flops = self.fast.flops_per_sample(tuple(x1.shape[1:]))
        if self._flops is None:
            from torch.utils.flop_counter import FlopCounterMode
            theta = self.flatten().requires_grad_(True)
            with FlopCounterMode(display=False) as counter:
                self._batch_loss(theta, x1, y1).backward()
            self._flops = float(counter.get_total_flops())
        return self._flops

    def per_sample_loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.kind == "regression":
            return 0.5 * (out[..., 0] - y) ** 2
        return F.cross_entropy(out, y, reduction="none")

    def forward(self, theta: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return functional_call(self.module, self.unflatten(theta), (x,))

    def _batch_loss(self, theta, x, y):
        return self.per_sample_loss(self.forward(theta, x), y).mean()

    def _sample_loss(self, theta, x, y):
        return self.per_sample_loss(self.forward(theta, x[None]), y[None])[0]

    def _weighted_loss(self, theta, x, y, w):
        return (self.per_sample_loss(self.forward(theta, x), y) * w).sum() / w.sum()

    def _losses(self, theta, x, y):
        out = self.forward(theta, x)
        losses = self.per_sample_loss(out, y)
        if self.kind == "regression":
            correct = torch.full_like(losses, math.nan)
        else:
            correct = (out.argmax(-1) == y).to(losses.dtype)
        return losses, correct

    def _eval_loss(self, theta, x, y, w):
        losses, correct = self._losses(theta, x, y)
        return (losses * w).sum(), (losses.detach(), correct)

    def grads(self, theta, x, y, w=None) -> torch.Tensor:
        """Minibatch-loss gradients ``[P, d]`` for ``P`` clients: theta ``[P, d]``, x ``[P, B, ...]``.

        theta may also be ``[Q, s, d]`` (P = Q * s), each of Q models the parameters of s consecutive clients,
        typically a broadcast view of x_t at a round's first local step: the grouped model reads it as it is
        (no P copies of x_t written first: 153 ms of a ResNet-18-GN W5 round), other paths take its copy.
        ``w`` (``[P, B]``, optional) masks padded samples in full-batch mode.
        """
        graphed = self.fast is not None and w is None and graphs_enabled(self.device)
        if theta.dim() == 3 and (graphed or not isinstance(self.fast, GroupedModel)):
            theta = theta.reshape(-1, theta.shape[-1])
        if graphed:
            if self._graphed is None or self._graphed.fn != self.fast.grads:  # (re)built for this fast path
                self._graphed = GraphedCall(self.fast.grads)
            return self._graphed(theta, x, y)
        if self.fast is not None:
            return self.fast.grads(theta, x, y, w)
        if w is None:
            return self._batched_grad(theta, x, y)
        return self._batched_grad_weighted(theta, x, y, w)

    def evaluate(self, theta, x, y, w):
        """For models theta ``[Q, d]`` on shared data x ``[N, ...]``: gradient of sum_n w[q, n] loss
        ``[Q, d]``, per-sample losses ``[Q, N]`` and correctness ``[Q, N]`` (NaN for regression).

        Runs over chunks of the data whose activations for all Q models fit in ``EVAL_BYTES``, so a
        full CIFAR training set evaluates in bounded memory; data that fits is one call."""
        g, losses, correct = None, [], []
        for i in self._chunks(x, len(theta)):  # a running sum: two [Q, d] gradients held, not one per chunk
            g_i, loss_i, correct_i = self._evaluate_chunk(theta, x[i], y[i], w[:, i])
            g = g_i if g is None else g.add_(g_i)  # g is the first chunk's own result: in place is safe
            losses.append(loss_i)
            correct.append(correct_i)
        if len(losses) == 1:
            return g, losses[0], correct[0]
        return g, torch.cat(losses, 1), torch.cat(correct, 1)

    def evaluate_own(self, theta, x, y, w):
        """:meth:`evaluate` on data of each model's own: theta ``[Q, d]``, x ``[Q, N, ...]``, y and w
        ``[Q, N]`` (e.g. the one client a sample perturbation gives trajectory B alone). Runs over chunks of
        the models whose activations take <= ``EVAL_BYTES``."""
        step = max(1, EVAL_BYTES // (x.shape[1] * self._sample_bytes(x[0])))
        parts = [self._evaluate_chunk(theta[i:i + step], x[i:i + step], y[i:i + step], w[i:i + step], batched=True)
                 for i in range(0, len(theta), step)]
        return tuple(torch.cat(p) for p in zip(*parts)) if len(parts) > 1 else parts[0]

    def _evaluate_chunk(self, theta, x, y, w, batched: bool = False):
        if self.fast is not None:
            return self.fast.evaluate(theta, x, y, w, batched=batched)
        g, (_, (losses, correct)) = (self._eval_own if batched else self._eval)(theta, x, y, w)
        return g, losses, correct

    def _chunks(self, x: torch.Tensor, models: int) -> list:
        """Slices of the sample axis of x whose activations for ``models`` models take <= EVAL_BYTES."""
        step = max(1, EVAL_BYTES // (models * self._sample_bytes(x)))
        return [slice(i, i + step) for i in range(0, len(x), step)]

    def _sample_bytes(self, x: torch.Tensor) -> int:
        """Activation bytes of one sample of ``x [N, ...]`` and one model (measured once): three times its
        leaf modules' outputs (activations, saved copies, their gradients), or twice what the backward keeps
        (saved tensors, each storage once, the parameters not counted) where that is more. The second counts
        what happens inside a module: the char LSTM's cell loop keeps ~515 KB per sample over its 80 steps
        against outputs of 35 KB, and its evaluation chunks took ~10 GiB of a 512 MiB budget when only the
        outputs were counted (``fedsagd-shakespeare``)."""
        if self._activation_bytes is None:
            sizes = []
            hooks = [m.register_forward_hook(lambda _m, _i, out: sizes.extend(
                t.numel() * t.element_size() for t in (out if isinstance(out, tuple) else (out,))
                if isinstance(t, torch.Tensor))) for m in self.module.modules() if not list(m.children())]
            try:
                with torch.no_grad():
                    self.module(x[:1])
            finally:
                for h in hooks:
                    h.remove()
            self._activation_bytes = max(3 * max(1, sum(sizes)), 2 * self._saved_bytes(x[:1]))
        return self._activation_bytes

    def _saved_bytes(self, x1: torch.Tensor) -> int:
        """Bytes the backward of one sample's loss keeps (each storage once; the parameters and the data not
        counted)."""
        storages = {}
        theta = self.flatten().requires_grad_(True)

        def pack(t):
            storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        y1 = torch.zeros(1, dtype=torch.long if self.kind != "regression" else theta.dtype, device=x1.device)
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            self._batch_loss(theta, x1, y1)
        for t in (theta, x1):  # the parameters, and the data x1 is a view of, exist before the forward
            storages.pop(t.untyped_storage().data_ptr(), None)
        return sum(storages.values())

    def per_sample_grads(self, theta, x, y, chunk: int = 512) -> torch.Tensor:
        """Per-sample loss gradients ``[N, d]`` of one model theta ``[d]`` (chunked to bound memory). With a fast
        path, each sample is a client of one sample of the engine's batched gradient (no ``torch.func``)."""
        if self.fast is not None:
            step = lambda xc, yc: self.grads(theta.expand(len(xc), -1), xc[:, None], yc[:, None])  # noqa: E731
        else:
            step = lambda xc, yc: self._per_sample(theta, xc, yc)  # noqa: E731
        return torch.cat([step(x[i:i + chunk], y[i:i + chunk]) for i in range(0, len(x), chunk)])

    def grouped(self):
        """The traced grouped model (``stabkit.engine.grouped``: batched Hessian-vector products by a double
        backward) where it is the fast path, else None. The Sequential models keep forward-over-reverse
        ``torch.func`` for HVPs: on LeNet-5 the grouped double backward was not faster (one thread, 2,000
        samples: 2.3-2.5 s vs 1.8-2.1 s per HVP, 8 probes as models 2.0 vs 2.4 s each, load ~14)."""
        return self.fast if isinstance(self.fast, GroupedModel) else None

    def hvp(self, theta, v, x, y, w) -> torch.Tensor:
        """Hessian-vector product of the weighted loss sum_n w_n loss_n / sum_n w_n at theta ``[d]``."""
        return self.hvps(theta[None], v[None], x, y, (w / w.sum())[None])[0]

    def hvps(self, theta, V, x, y, w) -> torch.Tensor:
        """Hessian-vector products ``[Q, d]`` of F_q = sum_n w[q, n] loss_n for Q models ``theta [Q, d]`` at
        once on shared data ``x [N, ...]``, row q times ``V[q]``. The models are independent, so the Hessian of
        the sum over models is block diagonal and one double backward gives every row. Models with a fast path
        take it through plain autograd (the grouped graph, or the Sequential forward): no ``torch.func``
        transform, whose first use imports ``torch._dynamo`` (1-1.5 s of a run's start-up). Other models keep
        forward-over-reverse ``torch.func``, which their training already uses."""
        if isinstance(self.fast, GroupedModel):
            return self.fast.hvp(theta, V, x, y, w)
        if isinstance(self.fast, SeqGrad):
            with torch.enable_grad():
                th = theta.detach().requires_grad_(True)
                out, _ = self.fast.forward(th, x, batched=False)  # [Q, N, out]
                loss = (self.per_sample_loss(out.flatten(0, 1), y.repeat(len(th))).view(len(th), -1) * w).sum()
                g = torch.autograd.grad(loss, th, create_graph=True)[0]
                # the gradient of the scalar g . V, not grad(g, th, V): handing autograd.grad output gradients
                # imports torch.fx's symbolic shapes and sympy (0.3 s of a run) to compare their sizes
                return torch.autograd.grad((g * V).sum(), th)[0].detach()
        rows = [torch.func.jvp(lambda th: grad(self._weighted_loss)(th, x, y, w_q), (th_q,), (v_q,))[1] * w_q.sum()
                for th_q, v_q, w_q in zip(theta, V, w)]  # _weighted_loss divides by sum w; F_q does not
        return torch.stack(rows)

    @torch.no_grad()
    def losses(self, theta, x, y):
        """Per-sample losses and correctness ``[Q, N]`` of models theta ``[Q, d]`` (no gradient; in the
        same memory-bounded chunks as :meth:`evaluate`)."""
        forward = self.fast.eval_losses if self.fast is not None else self._forward_losses
        parts = [forward(theta, x[i], y[i]) for i in self._chunks(x, len(theta))]
        if len(parts) == 1:
            return parts[0]
        return torch.cat([p[0] for p in parts], 1), torch.cat([p[1] for p in parts], 1)
