"""GraphModel.jacobian(x) and GraphModel.local_lipschitz(x) (docs/graph.md#forward-mode-and-jacobian-enclosures):
torch modules (float64, fixed seeds) exported into memory and imported as graphs; regatta's Jacobian, by its
own forward- and reverse-mode sweeps over the graph, against torch.autograd.functional.jacobian on the module,
and the local Lipschitz estimate against the largest singular value of torch's Jacobian, below the certified
upper bound. Two independent computations: torch's autograd kernels against regatta's graph walk."""
import numpy as np
import pytest

import regatta

torch = pytest.importorskip("torch")
nn = torch.nn

if not regatta._regatta.onnx_available:
    pytest.skip("regatta was built without ONNX import", allow_module_level=True)

from test_graph_model import build  # noqa: E402  (the modules of the forward comparison)


class Mlp(nn.Module):
    """More outputs than inputs: the Jacobian by columns (forward mode)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 9), nn.Tanh())

    def forward(self, x):
        return self.net(x)


def torch_jacobian(module, x):
    j = torch.autograd.functional.jacobian(module, x)
    return j.reshape(module(x).numel(), x.numel()).numpy()


@pytest.mark.parametrize("name", ["encoder_prenorm_gelu", "vit_linear_patch_no_final_norm", "mlp"])
def test_jacobian_equals_torch_autograd(name):
    if name == "mlp":
        torch.manual_seed(3)
        module, x = Mlp().double().eval(), torch.randn(1, 4, dtype=torch.float64)
    else:
        module, x = build(name)
    model = regatta.Model.from_torch(module, x)
    ours = model.jacobian(x)
    reference = torch_jacobian(module, x)
    assert ours.shape == reference.shape
    assert np.abs(reference).max() > 1e-2
    assert np.abs(ours - reference).max() <= 1e-10 * np.abs(reference).max(), (name, np.abs(ours - reference).max())


def test_local_lipschitz_estimate_is_torchs_largest_singular_value_below_the_certified_bound():
    module, x = build("encoder_prenorm_gelu")
    model = regatta.Model.from_torch(module, x)
    result = model.local_lipschitz(x)
    sigma = np.linalg.norm(torch_jacobian(module, x), 2)
    assert abs(result["estimate"] - sigma) <= 1e-6 * sigma, (result, sigma)
    assert sigma <= result["certified_upper"] * (1 + 1e-12)
    assert result["certified_upper"] <= (1 + 1e-6) * sigma  # at a point the MPFI Jacobian is nearly exact
    assert result["iterations"] >= 1
