#!/usr/bin/python3
"""Bad test sets for `regatta certify` (tests/cli): each is refused with exit 2 and one line.

Made with:  /usr/bin/python3 tests/data/vit_digits/bad/make_bad_inputs.py   (numpy; deterministic bytes)

  label_out_of_range.npz  the first 3 test images, labels [2, 10, 4] (the model has classes 0..9)
  wrong_image_size.npz    images (3, 7, 7)
  empty_batch.npz         images (0, 8, 8), labels (0,)
  nan_pixel.npz           the first 3 test images with pixel (1, 3, 4) = NaN
  no_labels.npz           images only
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from fixture_files import write_npz  # noqa: E402  (the fixtures' npz writer: deterministic bytes)


def main():
    test = np.load(os.path.join(HERE, "..", "test_set.npz"))
    images, labels = test["images"][:3].copy(), test["labels"][:3].copy()
    write_npz(os.path.join(HERE, "label_out_of_range.npz"),
              {"images": images, "labels": np.array([2, 10, 4], dtype=np.int64)})
    write_npz(os.path.join(HERE, "wrong_image_size.npz"), {"images": images[:, :7, :7].copy(), "labels": labels})
    write_npz(os.path.join(HERE, "empty_batch.npz"),
              {"images": np.zeros((0, 8, 8)), "labels": np.zeros((0,), dtype=np.int64)})
    nan = images.copy()
    nan[1, 3, 4] = np.nan
    write_npz(os.path.join(HERE, "nan_pixel.npz"), {"images": nan, "labels": labels})
    write_npz(os.path.join(HERE, "no_labels.npz"), {"images": images})


if __name__ == "__main__":
    main()
