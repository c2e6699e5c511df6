"""GraphModel.robustness (docs/models.md#certifying-an-onnx-graph): on a linear model the exact robustness
radius is closed-form (margin / ||w_label - w_c|| in the dual norm, minimised over c), computed here in
numpy independently of regatta; the certified radius must lie below it (certified) and within the search's
tolerance of it (affine forms are exact on linear maps), the attack radius above it (PGD finds the boundary)
within its 2 % bisection. On a small ViT the certified radius stays below the attack radius."""
import numpy as np
import pytest

import regatta

torch = pytest.importorskip("torch")
if not regatta._regatta.onnx_available:
    pytest.skip("regatta was built without ONNX import", allow_module_level=True)


def linear_model(seed=3, inputs=6, classes=4):
    torch.manual_seed(seed)
    module = torch.nn.Linear(inputs, classes).double().eval()
    x = torch.randn(1, inputs, dtype=torch.float64)
    return module, x


def exact_radius(module, x, label, dual_order):
    W = module.weight.detach().numpy()
    b = module.bias.detach().numpy()
    z = W @ x.numpy().ravel() + b
    radii = [(z[label] - z[c]) / np.linalg.norm(W[label] - W[c], ord=dual_order)
             for c in range(len(z)) if c != label]
    return min(radii)


@pytest.mark.parametrize("norm, dual_order", [("2", 2), ("inf", 1)])
def test_linear_model_radius_is_the_closed_form(norm, dual_order):
    module, x = linear_model()
    model = regatta.Model.from_torch(module, x)
    label = int(np.argmax(model.logits(x)))
    row = model.robustness(x, label, norm=norm, tolerance=0.01)
    exact = exact_radius(module, x, label, dual_order)
    assert row.prediction == label and row.margin_lower > 0
    assert 0 < row.certified_radius <= exact
    assert row.certified_radius >= exact / 1.03  # exact on linear maps, up to the search's tolerance
    assert row.attack_radius is not None
    assert exact <= row.attack_radius * (1 + 1e-9) and row.attack_radius <= exact * 1.03
    assert row.method == "affine" and row.raw["norm"] == norm


def test_a_wrong_label_certifies_nothing():
    module, x = linear_model()
    model = regatta.Model.from_torch(module, x)
    label = int(np.argmin(model.logits(x)))
    row = model.robustness(x, label)
    assert row.certified_radius == 0 and row.prediction != label


def test_input_range_caps_the_linf_search():
    module, x = linear_model(seed=5)
    x = torch.rand(1, 6, dtype=torch.float64)
    model = regatta.Model.from_torch(module, x)
    label = int(np.argmax(model.logits(x)))
    row = model.robustness(x, label, norm="inf", input_range=(0.0, 1.0))
    assert 0 <= row.certified_radius <= 1.0
    if row.attack_radius is not None:
        assert row.certified_radius <= row.attack_radius


def test_vit_certified_below_attack():
    from test_graph_model import build  # the same small models as the logits tests
    module, x = build("vit_linear_patch_no_final_norm")
    model = regatta.Model.from_torch(module, x)
    label = int(np.argmax(model.logits(x)))
    row = model.robustness(x, label, norm="2")
    assert row.margin_lower > 0
    assert row.certified_radius > 0
    assert row.attack_radius is None or row.certified_radius <= row.attack_radius
    assert len(model.attention_layers) == 2
    assert all(layer["heads"] == 3 for layer in model.attention_layers)


@pytest.mark.parametrize("kwargs, message", [
    (dict(norm="3"), "norm: must be '2' or 'inf'"),
    (dict(tolerance=0.0), "tolerance: must be in (0, 1]"),
    (dict(input_range=(1.0, 0.0)), "input_range: must be (lo, hi)"),
    (dict(input_range="ab"), "input_range: expected (lo, hi)"),
])
def test_bad_options_are_one_line_input_errors(kwargs, message):
    module, x = linear_model()
    model = regatta.Model.from_torch(module, x)
    with pytest.raises(regatta.InputError) as error:
        model.robustness(x, 0, **kwargs)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_bad_label_is_refused():
    module, x = linear_model()
    model = regatta.Model.from_torch(module, x)
    with pytest.raises(regatta.InputError, match="label"):
        model.robustness(x, 7)


def test_ctrl_c_stops_robustness_with_keyboard_interrupt():
    """SIGINT while robustness runs the generic affine walk (the digits ViT in l-inf, which takes tens of
    seconds): KeyboardInterrupt within a second, whatever the stopped computation ended with, and no thread
    left running."""
    import os
    import signal
    import threading
    import time

    root = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "vit_digits")
    model = regatta.Model.from_onnx(os.path.join(root, "vit_digits.onnx"))
    data = np.load(os.path.join(root, "test_set.npz"))
    x, label = data["images"][0], int(data["labels"][0])
    threads = threading.active_count()
    sent = []

    def interrupt():
        sent.append(time.monotonic())
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    timer = threading.Timer(1.0, interrupt)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        model.robustness(x, label, norm="inf", tolerance=0.001)
    caught = time.monotonic()
    timer.join()
    assert sent and caught - sent[0] < 1.0, caught - sent[0]
    assert threading.active_count() == threads
