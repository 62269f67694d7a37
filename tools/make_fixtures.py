#!/usr/bin/env python3
"""Make the upscaler test fixtures from a real photo.

From skimage's astronaut.png (a public-domain NASA photograph shipped by
Debian's python3-skimage) it cuts a 192x192 crop around the face, box-filters
it down to 96x96, and computes the 2x upscale of that with a NumPy
implementation of waifu2x written independently of ONNX Runtime
(tools/check_waifu2x.py: reference_forward on the weights in the ONNX file).

  tests/fixtures/astronaut_96.png               the input (8-bit)
  tests/fixtures/astronaut_192.png              the original crop (ground truth)
  tests/fixtures/astronaut_96_waifu2x_ref.png   the reference 2x upscale

Run with Debian's python: /usr/bin/python3 tools/make_fixtures.py
"""
import os
import sys

import numpy as np
import onnx
from PIL import Image

sys.path.insert(0, os.path.dirname(__file__))
import check_waifu2x  # noqa: E402

import skimage.data  # noqa: E402  (Debian's python3-skimage)

PHOTO = os.path.join(os.path.dirname(skimage.data.__file__), "astronaut.png")
OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures")
Y0, X0, SIZE = 40, 160, 192


def main():
    img = np.asarray(Image.open(PHOTO).convert("RGB"), dtype=np.float64)
    hi = img[Y0:Y0 + SIZE, X0:X0 + SIZE]
    lo = hi.reshape(SIZE // 2, 2, SIZE // 2, 2, 3).mean(axis=(1, 3))
    lo8 = np.clip(lo + 0.5, 0, 255).astype(np.uint8)
    model = onnx.load(os.path.join(os.path.dirname(__file__), "..", "models", "waifu2x_scale2x", "model.onnx"))
    layers = check_waifu2x.layers_from_model(model)
    x = (lo8.astype(np.float32) / 255.0).transpose(2, 0, 1)[None]
    y = check_waifu2x.reference_forward(layers, x)[0].transpose(1, 2, 0)
    os.makedirs(OUT, exist_ok=True)
    Image.fromarray(lo8).save(os.path.join(OUT, "astronaut_96.png"))
    Image.fromarray(hi.astype(np.uint8)).save(os.path.join(OUT, "astronaut_192.png"))
    Image.fromarray((np.clip(y, 0, 1) * 255 + 0.5).astype(np.uint8)).save(
        os.path.join(OUT, "astronaut_96_waifu2x_ref.png"))
    print("wrote fixtures to", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
