"""Points of an l2 ball or l-inf box around a token-embedding input, for the sampling checks of certify's
tests on causal text models (certify_gpt_causal.py, certify_inf_mask.py): uniform points inside, and the ends
of projected gradient ascent on torch's float64 loss margin at one token, the search that finds a label change
at the attack radius when there is one. Needs torch."""
import torch


def project(d, r, norm):
    """d moved into the l2 ball or the l-inf box of radius r (a batch along axis 0)."""
    if norm == "inf":
        return d.clamp(-r, r)
    n = d.flatten(1).norm(dim=1).clamp(min=r).view(-1, 1, 1)
    return d * (r / n)


def points_inside(reference, x, r, position, label, norm):
    """264 offsets inside the set of radius r around x (batch of 1): 256 uniform (l2: 64 on the sphere; l-inf:
    128 vertices), then 8 ends of 12 steps of projected gradient ascent from random starts on the margin of
    `label` at token `position` of reference(x + offset) (a callable on a batch, logits [batch, n, classes])."""
    d = torch.randn(256, *x.shape[1:], dtype=torch.float64)
    if norm == "2":
        d = d / d.flatten(1).norm(dim=1).view(-1, 1, 1)
        scale = torch.rand(256, dtype=torch.float64) ** (1 / d[0].numel())
        scale[:64] = 1.0
        d = d * (r * scale).view(-1, 1, 1)
    else:
        d = torch.sign(d) * r
        d[128:] *= torch.rand(128, *x.shape[1:], dtype=torch.float64)
    a = project(0.5 * d[:8].clone(), r, norm)
    for _ in range(12):
        a.requires_grad_(True)
        y = reference(x + a)[:, position, :]
        other = y.clone()
        other[:, label] = -float("inf")
        (g,) = torch.autograd.grad((y[:, label] - other.max(dim=1).values).sum(), a)
        with torch.no_grad():
            step = torch.sign(g) if norm == "inf" else g / g.flatten(1).norm(dim=1).clamp(min=1e-300).view(-1, 1, 1)
            a = project(a - 0.25 * r * step, r, norm)
    return torch.cat([d, a.detach()])
