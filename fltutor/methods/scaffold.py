"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II by default, option I on request).

The server keeps a control variate c, each client its own c_i (private). Every local step
uses the gradient g - c_i + c. After training, a client sets
c_i+ = c_i - c + (x - y_i) / (K lr), K its number of local steps (K_eff under client
momentum, see below), and sends its model and c_i+ - c_i. The server moves the model like
FedOpt (server SGD at rate ``server_lr``, or an adaptive optimizer and GMA's mask) and sets
c <- c + sum (c_i+ - c_i) / N.
``weighting``: the model update averages clients by sample count ("samples", the default, as FedAvg
does) or equally ("uniform": SCAFFOLD's own Alg. 1 line 16, the plain mean over the sampled clients, and the
weighted-averaging WAFFLE paper's Alg. 2 with alpha_i = 1/N). The two agree on equal-size clients.
``control``: how a client renews c_i. "II" (the paper's Alg. 1 line 12 option II, and the weighted-
averaging WAFFLE paper's Alg. 2): from the distance travelled, below. "I": c_i+ = the client's mean
mini-batch gradient at the server model x, one extra pass over its data per round
(``engine.mean_gradient``); it does not depend on the local path, so a path that went wrong does not
feed into the next round's correction.
With ``grad_clip_norm`` = G (a run setting), the local steps clip each raw mini-batch gradient, so option
II's c_i+ is a mean of clipped gradients and |c_i|, |c| <= G (tests/methods/test_scaffold.py). Option I's
gradient at x is not clipped: the bound holds for option II only.

Client momentum (GMA runs every client with SGD momentum m = 0.9). The corrected gradient
goes through the momentum buffer (``torch.optim.SGD`` on g - c_i + c, a fresh buffer every
round that runs on across the local epochs), so step k's gradient moves the model by
lr a_k, a_k = (1 - m^(K-k+1)) / (1 - m), not by lr. The paper's Alg. 1 assumes plain SGD,
where (x - y_i) / (K lr) is the mean corrected gradient. With momentum we divide by the
effective number of steps K_eff = sum_k a_k = (K - m (1 - m^K) / (1 - m)) / (1 - m)
(FedNova's ||a||_1, Wang et al. 2020) instead of K, so option II still gives
c_i+ = sum_k a_k g_k / sum_k a_k, the client's (momentum-weighted) mean gradient (g_k with
weight decay and FedProx's term, as the optimizer sees them); m = 0 gives K_eff = K, the
paper's rule. Dividing by K would give c_i+ = (1 - K_eff/K)(c_i - c) + (K_eff/K) mean_a(g):
while the gradients barely react, the correction's error is multiplied by 1 - K_eff/K each
round, and |1 - K_eff/K| > 1 from K = 4 at m = 0.9 (about -3 at K = 10, -8 at K = 100), so
the control variates grow geometrically and training diverges. (NIID-Bench and code derived from
it keep K but subtract lr (c - c_i) from the weights outside the optimizer, which is also
stable; there c_i+ is K_eff/K times the mean gradient.)
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import aggregators
from ..checks import option
from ..engine import broadcast, mean_gradient
from .base import WEIGHTINGS, Job, Method, Round
from .fedopt import FedOptParams, server_step


CONTROLS = ("II", "I")


@dataclass
class ScaffoldParams(FedOptParams):
    weighting: str = "samples"    # samples or uniform
    control: str = "II"           # how c_i is renewed: "II" from the local path, "I" the gradient at x

    def __post_init__(self):
        super().__post_init__()
        option("weighting", self.weighting, WEIGHTINGS)
        option("control", self.control, CONTROLS)


def effective_steps(n_steps, momentum=None, dtype=torch.float32):
    """K_eff = sum_{k=1..K} sum_{j<k} m^j per row, (P,): how many plain-SGD steps' worth the K steps of
    momentum SGD move the model (K when m = 0); a sum of positive terms (no cancellation as m -> 1)."""
    K = n_steps.to(dtype)
    if momentum is None or not bool((momentum != 0).any()):
        return K
    j = torch.arange(int(n_steps.max()), device=K.device, dtype=dtype)                  # (S,)
    m = momentum.to(device=K.device, dtype=dtype)
    return ((K[:, None] - j).clamp(min=0) * m[:, None] ** j).sum(1)                    # sum_j (K - j) m^j


def control_update(c_i, c, start, trained, n_steps, lr, momentum=None):
    """c_i+ = c_i - c + (x - y_i) / (K_eff lr) for every row, (P, ...) (option II; K_eff = K without momentum)."""
    scale = effective_steps(n_steps, momentum, lr.dtype) * lr
    return {k: c_i[k] - c[k] + (start[k] - trained[k]) / broadcast(scale, trained[k]) for k in trained}


class Scaffold(Method):
    """SCAFFOLD: control variates correct every local gradient for client drift."""
    name = "scaffold"
    Params = ScaffoldParams
    message_holds = "the client's whole trained model and the change of its control variate c_i"
    client_keeps = "its data and its control variate c_i"
    server_holds = "the global model and the control variate c"
    sends = ("c.",)               # the server's control variate travels with the model

    def init_server(self, global_params, num_clients):
        return {f"c.{k}": torch.zeros_like(v) for k, v in global_params.items()}

    def init_private(self, global_params, num_clients):
        return {f"c_i.{k}": torch.zeros(num_clients, *v.shape, dtype=v.dtype, device=v.device)
                for k, v in global_params.items()}

    def client_update(self, job: Job):
        names = list(job.start)
        c = job.server
        c_i = {k: job.private[f"c_i.{k}"] for k in names}
        c_rows = {k: c[f"c.{k}"] for k in names}
        corr = {k: c_rows[k] - c_i[k] for k in names}                        # g - c_i + c
        trained, _, loss = job.train(prox_mu=job.hp.get("mu"), correction=corr)
        if self.params.control == "I":   # the gradient at x (with weight decay, as the optimizer sees it)
            g = mean_gradient(job.model, job.start, job.x, job.y, job.batches)
            wd = job.hp.get("weight_decay")
            c_plus = {k: g[k] if wd is None else g[k] + broadcast(wd, g[k]) * job.start[k] for k in names}
        else:
            c_plus = control_update(c_i, c_rows, job.start, trained, job.batches.n_steps, job.hp["lr"],
                                     job.hp.get("momentum"))
        message = {**trained, **{f"dc.{k}": c_plus[k] - c_i[k] for k in names}}
        return message, {f"c_i.{k}": c_plus[k] for k in names}, loss

    def aggregate(self, global_params, server, message, rnd: Round):
        trained = {k: message[k] for k in global_params}
        weights = rnd.weights(self.params.weighting)
        new, _ = server_step(self.params, global_params, server, trained, weights)
        for k in global_params:  # c <- c + (1/N) sum over the cohort of (c_i+ - c_i)
            server[f"c.{k}"] = server[f"c.{k}"] + message[f"dc.{k}"].sum(0) / rnd.num_clients
        return new
