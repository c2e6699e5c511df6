"""What the three ViTs trained on the digits share (tests/data/vit_digits, vit_digits_torchvision,
vit_digits_encoder): the data split, the training loop (AdamW, cosine schedule, batch 16, float64, seeded), and
for the two ViTs written other ways the ONNX export with torch's logits of the 450 test images beside it."""
import os

import numpy as np
import torch
import torch.nn.functional as F

DIGITS = os.path.dirname(os.path.abspath(__file__))


def split(checked=True):
    """scikit-learn's digits (values /16 in [0, 1]) split into 1347 training and 450 test images, stratified,
    random_state 0, as torch tensors. checked: the test half must be tests/data/vit_digits/test_set.npz (the
    digits ViT's own train.py, which writes that file, passes False)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(digits.images / 16.0, digits.target, test_size=450,
                                                        stratify=digits.target, random_state=0)
    if checked:
        with np.load(os.path.join(DIGITS, "test_set.npz")) as z:
            if not (np.array_equal(z["images"], x_test) and np.array_equal(z["labels"], y_test)):
                raise SystemExit("the split differs from tests/data/vit_digits/test_set.npz")
    return torch.tensor(x_train), torch.tensor(x_test), torch.tensor(y_train), torch.tensor(y_test)


def train(model, x_train, y_train, epochs, lr=1e-3, batch=16):
    """AdamW (weight decay 0.1) under a cosine schedule, mini-batches drawn by a generator seeded with 1; the
    model is left in eval mode."""
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.1)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimiser, epochs)
    generator = torch.Generator().manual_seed(1)
    for _ in range(epochs):
        model.train()
        order = torch.randperm(len(x_train), generator=generator)
        for start in range(0, len(order), batch):
            idx = order[start:start + batch]
            loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        schedule.step()
    model.eval()


def train_and_export(make_model, name, here, description, epochs, lr=1e-3):
    """make_model() built after torch.manual_seed(0), trained in float64 on one thread, exported to ONNX next
    to the script (here) with torch's logits of the test images and a README."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = make_model().double()
    x_train, x_test, y_train, y_test = split()
    train(model, x_train, y_train, epochs, lr)
    with torch.no_grad():
        logits = model(x_test)
        one = model(x_test[:1])
    accuracy = float((logits.argmax(1) == y_test).double().mean())
    if not (one - logits[:1]).abs().max().item() <= 1e-12:
        raise SystemExit("the logits of a batch of one differ from the batch's")
    np.save(os.path.join(here, name + ".logits.npy"), logits.numpy())
    onnx_path = os.path.join(here, name + ".onnx")
    torch.onnx.export(model, (x_test[:1].clone(),), onnx_path, opset_version=17, input_names=["images"],
                      output_names=["logits"], do_constant_folding=True)
    parameters = sum(p.numel() for p in model.parameters())
    script = os.path.relpath(os.path.join(here, "train.py"), os.path.join(here, "..", "..", ".."))
    with open(os.path.join(here, "README.md"), "w") as f:
        f.write(f"# {name}: a ViT written another way, trained on the digits (regatta fixture)\n\n"
                f"Made by `/usr/bin/python3 {script}` with torch {torch.__version__} (float64, one thread, "
                f"seeds 0 and 1; the split and the training loop are training.py in tests/data/vit_digits).\n\n"
                f"- data: the split of tests/data/vit_digits (1347 training, 450 test images; its "
                f"test_set.npz is the test set)\n"
                f"- model: {description}; {parameters} parameters\n"
                f"- training: AdamW (lr {lr:g}, weight decay 0.1), cosine schedule, {epochs} epochs, batch 16\n"
                f"- test accuracy: {accuracy:.4f} ({round(accuracy * 450)} of 450)\n"
                f"- files: {name}.onnx (opset 17, float64 weights, input `images` (1, 8, 8), output `logits` "
                f"(1, 10)), {name}.logits.npy (torch's float64 logits of the 450 test images)\n"
                f"- certify: `regatta certify --model tests/data/{name}/{name}.onnx "
                f"--data tests/data/vit_digits/test_set.npz`\n")
    print(f"{name}: test accuracy {accuracy:.4f}, {parameters} parameters")
