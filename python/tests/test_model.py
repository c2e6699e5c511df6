"""regatta.Model on the digits ViT fixture (tests/data/vit_digits: timm layout, trained by train.py) against
torch's float64 logits of the same images saved with it, and its certified logit enclosures against them.
The per-input robustness (Model.robustness, one row of `regatta certify`) takes ~40 s per input here: it is
checked against the command line by hand (docs/python.md), not in this suite."""
import os

import numpy as np
import pytest

import regatta
from conftest import EPS

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "vit_digits")


@pytest.fixture(scope="module")
def model():
    return regatta.Model.from_file(os.path.join(FIXTURE, "vit_digits.safetensors"))


@pytest.fixture(scope="module")
def data():
    return dict(np.load(os.path.join(FIXTURE, "test_set.npz")))


def test_logits_match_torch_and_the_enclosures_hold_them(model, data):
    assert model.input_shape == (1, 8, 8) and model.classes == 10
    for image, logits in zip(data["images"][:20], data["logits"][:20]):
        ours = model(image)
        # Chains of <= 10^3 rounded operations through two blocks (tests/operators/model_test.cpp): a few
        # 10^3 eps relative to max(1, |logits|); 16 x 10^3 eps (3.6e-12) with margin, a wrong mapping gives O(1).
        np.testing.assert_allclose(ours, logits, rtol=0, atol=16 * 1000 * EPS * max(1, np.abs(logits).max()))
        enclosure = model.logits_enclosure(image)
        assert all(isinstance(i, regatta.Interval) and t in i and o in i for i, t, o in zip(enclosure, logits, ours))


@pytest.mark.parametrize("call,start", [
    (lambda m: m(np.zeros(63)), "image: has 63 entries, the model takes 1 x 8 x 8 = 64"),
    (lambda m: m(np.full(64, np.nan)), "image"),
    (lambda m: m.robustness(np.zeros(64), 10), "label: 10 is not a class of the model (0..9)"),
    (lambda m: m.robustness(np.zeros(64), 1, tolerance=0), "tolerance: must lie in (0, 1)"),
])
def test_bad_input_raises_input_error(model, call, start):
    with pytest.raises(regatta.InputError) as info:
        call(model)
    assert str(info.value).startswith(start), str(info.value)


def test_missing_model_file_is_an_input_error(tmp_path):
    with pytest.raises(regatta.InputError):
        regatta.Model.from_file(tmp_path / "none.safetensors")
