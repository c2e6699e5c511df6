"""regatta.Model.graph() (docs/graph.md#front-ends-safetensors-layouts): a safetensors model as a GraphModel.
The graph's double forward (regatta's graph walk) must equal the Model's own forward (the operators' matrix
code) to 1e-12 relative, and the graph's certified enclosure must hold the Model's logits up to their rounding,
for the committed ViT, GPT-2, BERT and LLaMA models."""
import os

import numpy as np
import pytest

import regatta

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data")
MODELS = {
    "timm-vit": os.path.join(DATA, "vit_digits", "vit_digits.safetensors"),
    "gpt2": os.path.join(DATA, "text_models", "gpt2", "model.safetensors"),
    "bert": os.path.join(DATA, "text_models", "bert", "model.safetensors"),
    "llama": os.path.join(DATA, "text_models", "llama", "model.safetensors"),
}


def an_input(model, rng, tokens):
    if model.layout == "timm-vit":
        return rng.uniform(0, 1, (8, 8))
    ids = rng.integers(0, 40, tokens)
    return model.embed_tokens(list(ids)) + 0.05 * rng.standard_normal((tokens, model.width))


@pytest.mark.parametrize("layout", sorted(MODELS))
def test_graph_logits_equal_the_models(layout):
    model = regatta.Model.from_file(MODELS[layout])
    rng = np.random.default_rng(1)
    tokens = 6
    graph = model.graph() if layout == "timm-vit" else model.graph(tokens)
    assert isinstance(graph, regatta.GraphModel)
    assert layout in graph.source
    expected_shape = (1, 1, 8, 8) if layout == "timm-vit" else (tokens, model.width)
    assert tuple(graph.input_shape) == expected_shape
    for _ in range(3):
        x = an_input(model, rng, tokens)
        ours = np.asarray(graph.logits(x)).ravel()
        reference = np.asarray(model(x))
        assert np.max(np.abs(ours - reference)) <= 1e-12 * max(1.0, np.max(np.abs(reference)))
        for interval, value in zip(graph.logits_enclosure(x), reference):
            assert interval.lower <= value + 1e-12 and value - 1e-12 <= interval.upper
    # one attention layer per block; LLaMA's with its rotary embedding on queries and keys
    assert len(graph.attention_layers) == model.depth
    assert all(layer["rotary"] == (layout == "llama") for layer in graph.attention_layers)


def test_graph_refuses_bad_token_counts():
    gpt2 = regatta.Model.from_file(MODELS["gpt2"])
    with pytest.raises(regatta.InputError, match="tokens"):
        gpt2.graph(17)
    vit = regatta.Model.from_file(MODELS["timm-vit"])
    with pytest.raises(regatta.InputError, match="tokens"):
        vit.graph(3)


@pytest.mark.parametrize("layout", ["gpt2", "bert", "llama"])
def test_graph_robustness_is_consistent_with_the_models(layout):
    # Two independent certifications of the same l2 question: the affine forms over the graph (GraphModel)
    # and the Model's own pass. A certified radius of one must never exceed a misclassifying radius that the
    # other's attack found (both attacks are estimates, but a point they report is misclassified). The wide
    # input range keeps the graph pass (GPT-2's and BERT's graphs are recognised transformers, whose row
    # would otherwise be the Model's; in l2 the ball is certified whole, docs/models.md#certifying-an-onnx-graph).
    model = regatta.Model.from_file(MODELS[layout])
    x = model.embed_tokens([1, 2, 3, 4, 5])
    graph = model.graph(5)
    label = int(np.argmax(graph.logits(x)))
    by_graph = graph.robustness(x, label, tolerance=0.2, input_range=(-1e3, 1e3))
    by_model = model.robustness(x, label, tolerance=0.2)
    assert float(by_graph.certified_radius) > 0 and float(by_model.certified_radius) > 0
    if by_model.attack_radius is not None:
        assert float(by_graph.certified_radius) <= float(by_model.attack_radius)
    if by_graph.attack_radius is not None:
        assert float(by_model.certified_radius) <= float(by_graph.attack_radius)
