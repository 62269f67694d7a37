#!/usr/bin/python3
"""Generate the small synthetic ONNX models used by ebb's tests and benchmarks.

Run with Debian's interpreter (python3-onnx 1.12, python3-numpy):

    /usr/bin/python3 tools/make_test_models.py --out models
    /usr/bin/python3 tools/make_test_models.py --conv-mb 10,100,300 --external-mb 100 --out build/generated_models

Writes (deterministically, fixed seed):
  OUT/convnet/model.onnx  x f32[N,3,H,W] -> 4x Conv3x3 (+Relu) -> y f32[N,3,H,W]
  OUT/tiny/model.onnx     x f32[1,64] -> MatMul(64x64) -> Add -> Relu -> y f32[1,64]
  OUT/mixed/model.onnx    a f32, b i64, c u8, flag bool (all [N,4]) ->
                          sum f32, b2 i64, nflag bool, d f64 (all [N,4])
  OUT/twochannel/model.onnx  1x1 conv on 2-channel images (error tests)
  OUT/strings/model.onnx  text string[N,M] -> echo string[N,M] (Identity),
                          id i64[N,M] (ai.onnx.ml LabelEncoder: apple 0, banana 1,
                          cherry 2, anything else -1)

With --conv-mb, instead: FP32 conv models of about that many MB of weights each,
for memory footprint tests and benchmarks (not committed; the build writes them):
  OUT/conv_<N>mb/model.onnx  x f32[N,3,H,W] (H, W multiples of 8) -> Conv3x3 3->4
      -> SpaceToDepth(8) -> L x (Conv3x3 256->256 + Relu) -> DepthToSpace(8)
      -> Conv3x3 4->3 -> y f32[N,3,H,W]
  The weights are random (memory does not depend on their values); the 256-channel
  convs run at 1/8 of the input side, so a 64x64 input is cheap to run while
  every weight byte is used.
make_matmul() (y = x @ w, every weight one value) is for the external-data tests, which import this
file and write it with write_external() (model.onnx + weights.bin) or write() (one file).

With --external-mb as well (some of the --conv-mb sizes), those are also written with ONNX external data:
  OUT/conv_<N>mb_ext/model.onnx + weights.bin  the same graph and weights (so the same
      outputs), every initializer's bytes in weights.bin beside model.onnx

With --test-out TEST as well (models only the protocol tests use, kept out of the served `models/`):
  TEST/identity/model.onnx one input per element type (bool, uint8..uint64, int8..int64,
                          fp32, fp64, string), each [N], -> out_<type> = Identity
  TEST/halves/model.onnx  the same for fp16 and bf16 (which the gRPC protocol carries raw only)
  TEST/wrong_shape/model.onnx  y = reshape(x f32[1,4], s i64[2]), y declared f32[1,8] (a wrong static
                          output shape for s = [1,4])
  TEST/zeros/model.onnx   n i64[1] -> y f32[n] zeros: a 3 MiB reply to a 100-byte request
  TEST/spin/model.onnx    n i64[1] -> y f32[1] = n after n Loop iterations: a slow run without memory

opset 17, ir_version 8 (accepted by ONNX Runtime 1.29).
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
IR_VERSION = 8
SEED = 20240601


def finish(graph, name, full_check=True, extra_opsets=()):
    model = helper.make_model(
        graph,
        producer_name="ebb-make_test_models",
        producer_version="1",
        opset_imports=[helper.make_opsetid("", OPSET)] + [helper.make_opsetid(d, v) for d, v in extra_opsets],
    )
    model.ir_version = IR_VERSION
    model.doc_string = name
    if full_check:
        onnx.checker.check_model(model, full_check=True)
    return model


def make_convnet(rng):
    chans = [3, 16, 16, 16, 3]
    nodes, inits = [], []
    prev = "x"
    for i in range(len(chans) - 1):
        cin, cout = chans[i], chans[i + 1]
        w = (rng.standard_normal((cout, cin, 3, 3)) * 0.1).astype(np.float32)
        b = (rng.standard_normal((cout,)) * 0.01).astype(np.float32)
        wn, bn = "conv%d.w" % i, "conv%d.b" % i
        inits += [numpy_helper.from_array(w, wn), numpy_helper.from_array(b, bn)]
        last = i == len(chans) - 2
        out = "y" if last else "conv%d" % i
        nodes.append(
            helper.make_node(
                "Conv", [prev, wn, bn], [out], name="conv%d" % i,
                kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1],
            )
        )
        if not last:
            nodes.append(helper.make_node("Relu", [out], ["relu%d" % i], name="relu%d" % i))
            prev = "relu%d" % i
    graph = helper.make_graph(
        nodes, "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        initializer=inits,
    )
    return finish(graph, "fully convolutional 3->16->16->16->3, 3x3 convs, same padding")


def make_tiny(rng):
    w = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((64,)) * 0.01).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "b"], ["add"], name="add"),
        helper.make_node("Relu", ["add"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    return finish(graph, "y = relu(x @ w + b), fixed shape [1,64]")


def make_mixed():
    two = numpy_helper.from_array(np.array(2, dtype=np.int64), "two")
    nodes = [
        helper.make_node("Cast", ["b"], ["b_f"], name="cast_b", to=TensorProto.FLOAT),
        helper.make_node("Cast", ["c"], ["c_f"], name="cast_c", to=TensorProto.FLOAT),
        helper.make_node("Add", ["a", "b_f"], ["ab"], name="add_ab"),
        helper.make_node("Add", ["ab", "c_f"], ["sum"], name="add_abc"),
        helper.make_node("Mul", ["b", "two"], ["b2"], name="mul_b"),
        helper.make_node("Not", ["flag"], ["nflag"], name="not_flag"),
        helper.make_node("Cast", ["a"], ["d"], name="cast_a", to=TensorProto.DOUBLE),
    ]
    shape = ["N", 4]
    graph = helper.make_graph(
        nodes, "mixed",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("b", TensorProto.INT64, shape),
            helper.make_tensor_value_info("c", TensorProto.UINT8, shape),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, shape),
        ],
        [
            helper.make_tensor_value_info("sum", TensorProto.FLOAT, shape),
            helper.make_tensor_value_info("b2", TensorProto.INT64, shape),
            helper.make_tensor_value_info("nflag", TensorProto.BOOL, shape),
            helper.make_tensor_value_info("d", TensorProto.DOUBLE, shape),
        ],
        initializer=[two],
    )
    return finish(graph, "sum=a+float(b)+float(c); b2=b*2; nflag=!flag; d=double(a)")


def make_twochannel(rng):
    """An image-to-image model on 2-channel images: what no PNG/JPEG holds, for error tests."""
    w = (rng.standard_normal((2, 2, 1, 1)) * 0.5).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="mix", kernel_shape=[1, 1])],
        "twochannel",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "H", "W"])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    return finish(graph, "1x1 conv on 2-channel images")


CONV_CHANNELS = 256
CONV_BLOCK = 8  # SpaceToDepth block: 4 channels * 8 * 8 = 256


def make_conv_weights_model(megabytes, rng):
    """About `megabytes` MB (10^6 bytes) of FP32 conv weights; see the module doc."""
    c = CONV_CHANNELS
    per_layer = 4 * (c * c * 9 + c)
    layers = max(1, int(round(megabytes * 1e6 / per_layer)))
    nodes, inits = [], []

    def conv(name, inp, out, cin, cout):
        fan_in = cin * 9
        w = rng.standard_normal((cout, cin, 3, 3), dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))
        b = np.zeros((cout,), dtype=np.float32)
        inits.extend([numpy_helper.from_array(w, name + ".w"), numpy_helper.from_array(b, name + ".b")])
        nodes.append(helper.make_node("Conv", [inp, name + ".w", name + ".b"], [out], name=name,
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))

    conv("stem", "x", "stem", 3, c // (CONV_BLOCK * CONV_BLOCK))
    nodes.append(helper.make_node("SpaceToDepth", ["stem"], ["s2d"], name="s2d", blocksize=CONV_BLOCK))
    prev = "s2d"
    for i in range(layers):
        conv("conv%d" % i, prev, "conv%d" % i, c, c)
        nodes.append(helper.make_node("Relu", ["conv%d" % i], ["relu%d" % i], name="relu%d" % i))
        prev = "relu%d" % i
    nodes.append(helper.make_node("DepthToSpace", [prev], ["d2s"], name="d2s", blocksize=CONV_BLOCK, mode="DCR"))
    conv("head", "d2s", "y", c // (CONV_BLOCK * CONV_BLOCK), 3)
    graph = helper.make_graph(
        nodes, "conv_%dmb" % megabytes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        initializer=inits,
    )
    # Checked by write() from the file: a full in-memory check of hundreds of MB is slow.
    return finish(graph, "%d convs of %dx%d 3x3 (random weights, about %d MB)" % (layers, c, c, megabytes),
                  full_check=False)


def make_matmul(side=64, value=1.0):
    """y = x @ w for x f32[1,side] and w side x side, every weight `value`: an input of ones gives
    side * value in every output (the external-data tests write it with write_external)."""
    w = np.full((side, side), value, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="matmul")], "matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])],
        initializer=[numpy_helper.from_array(w, "w")],
    )
    return finish(graph, "y = x @ w, every weight %g" % value)


STRING_KEYS = ["apple", "banana", "cherry"]


def make_strings():
    """String tensors through the run boundary: ONNX Runtime's CPU provider runs Identity and
    ai.onnx.ml LabelEncoder (opset 2) on strings."""
    shape = ["N", "M"]
    nodes = [
        helper.make_node("Identity", ["text"], ["echo"], name="echo"),
        helper.make_node(
            "LabelEncoder", ["text"], ["id"], name="lookup", domain="ai.onnx.ml",
            keys_strings=STRING_KEYS, values_int64s=list(range(len(STRING_KEYS))), default_int64=-1,
        ),
    ]
    graph = helper.make_graph(
        nodes, "strings",
        [helper.make_tensor_value_info("text", TensorProto.STRING, shape)],
        [
            helper.make_tensor_value_info("echo", TensorProto.STRING, shape),
            helper.make_tensor_value_info("id", TensorProto.INT64, shape),
        ],
    )
    return finish(graph, "echo = text; id = index of text in [apple, banana, cherry], else -1",
                  extra_opsets=[("ai.onnx.ml", 2)])


IDENTITY_TYPES = [
    ("bool", TensorProto.BOOL), ("uint8", TensorProto.UINT8), ("uint16", TensorProto.UINT16),
    ("uint32", TensorProto.UINT32), ("uint64", TensorProto.UINT64), ("int8", TensorProto.INT8),
    ("int16", TensorProto.INT16), ("int32", TensorProto.INT32), ("int64", TensorProto.INT64),
    ("fp32", TensorProto.FLOAT), ("fp64", TensorProto.DOUBLE), ("bytes", TensorProto.STRING),
]
HALF_TYPES = [("fp16", TensorProto.FLOAT16), ("bf16", TensorProto.BFLOAT16)]


def make_identity(types, graph_name):
    """Element types in and out unchanged: for protocol tests of every datatype."""
    nodes, inputs, outputs = [], [], []
    for name, elem in types:
        nodes.append(helper.make_node("Identity", ["in_" + name], ["out_" + name], name="id_" + name))
        inputs.append(helper.make_tensor_value_info("in_" + name, elem, ["N"]))
        outputs.append(helper.make_tensor_value_info("out_" + name, elem, ["N"]))
    graph = helper.make_graph(nodes, graph_name, inputs, outputs)
    return finish(graph, "out_<type> = in_<type> for " + ", ".join(t for t, _ in types))


def make_wrong_shape():
    """A model whose declared static output shape is wrong: y = Reshape(x, s), declared f32[1,8];
    with s = [1,4] the run makes f32[1,4]. Shape inference cannot see through a shape that is an
    input, so the declaration stands; ONNX Runtime runs the model (the run's own shape wins), and
    writing into a buffer of the declared shape fails: ebb must fall back to ORT's outputs."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
        "wrong_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    return finish(graph, "y = reshape(x, s), f32[1,4] for s = [1,4], with y declared f32[1,8]", full_check=False)


def make_zeros():
    """A reply far larger than its request: n i64[1] -> y f32[n] of zeros."""
    zero = helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])
    nodes = [helper.make_node("ConstantOfShape", ["n"], ["y"], name="zeros", value=zero)]
    graph = helper.make_graph(
        nodes, "zeros",
        [helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
    )
    return finish(graph, "y = n zeros (ConstantOfShape)")


def make_spin():
    """A run as long as asked that uses no memory: n i64[1] -> y f32[1] = n, counted by n Loop iterations."""
    one = numpy_helper.from_array(np.array(1, dtype=np.float32), "one")
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
         helper.make_node("Add", ["v_in", "one"], ["v_out"], name="count")],
        "spin_body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [])],
        initializer=[one],
    )
    start = numpy_helper.from_array(np.array(0, dtype=np.float32), "start")
    go = numpy_helper.from_array(np.array(True), "go")
    scalar = numpy_helper.from_array(np.array([], dtype=np.int64), "scalar")
    nodes = [
        helper.make_node("Reshape", ["n", "scalar"], ["trips"], name="trips"),
        helper.make_node("Loop", ["trips", "go", "start"], ["count"], name="spin", body=body),
        helper.make_node("Reshape", ["count", "shape1"], ["y"], name="y"),
    ]
    graph = helper.make_graph(
        nodes, "spin",
        [helper.make_tensor_value_info("n", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        initializer=[start, go, scalar, numpy_helper.from_array(np.array([1], dtype=np.int64), "shape1")],
    )
    return finish(graph, "y = n, after n Loop iterations: a slow run that needs no memory")


def write(model, out_dir, name, quiet=False):
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    tmp = path + ".tmp"
    data = model.SerializeToString()
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    onnx.checker.check_model(path)  # by path: also for models over the 2 GB protobuf limit
    if not quiet:
        print("make_test_models: wrote %s (%d bytes)" % (path, len(data)))
    return path


def write_external(model, out_dir, name, location="weights.bin", quiet=False):
    """`model` as OUT/name/model.onnx with every initializer's bytes in OUT/name/<location>; returns
    the model's path."""
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    weights = os.path.join(d, location)
    if os.path.exists(weights):
        os.remove(weights)  # onnx appends to an existing file
    model = onnx.ModelProto.FromString(model.SerializeToString())  # save_model converts in place
    path = os.path.join(d, "model.onnx")
    onnx.save_model(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location=location,
                    size_threshold=0)
    onnx.checker.check_model(path)
    if not quiet:
        print("make_test_models: wrote %s (%d bytes) and %s (%d bytes)"
              % (path, os.path.getsize(path), weights, os.path.getsize(weights)))
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory (e.g. models)")
    ap.add_argument("--conv-mb", help="comma-separated weight sizes in MB: write only conv_<N>mb models")
    ap.add_argument("--test-out", help="output directory of the protocol tests' models (e.g. tests/models)")
    ap.add_argument("--external-mb", default="",
                    help="with --conv-mb: sizes also written as conv_<N>mb_ext, the same model with external data")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(SEED)
    if args.conv_mb:
        external = {int(v) for v in args.external_mb.split(",") if v}
        for mb in (int(v) for v in args.conv_mb.split(",")):
            if mb <= 0 or mb > 1500:
                ap.error("--conv-mb values must be in 1..1500")
            model = make_conv_weights_model(mb, np.random.default_rng(SEED + mb))
            write(model, args.out, "conv_%dmb" % mb)
            if mb in external:
                write_external(model, args.out, "conv_%dmb_ext" % mb)
        return 0
    write(make_convnet(rng), args.out, "convnet")
    write(make_tiny(rng), args.out, "tiny")
    write(make_mixed(), args.out, "mixed")
    write(make_twochannel(rng), args.out, "twochannel")
    write(make_strings(), args.out, "strings")
    if args.test_out:
        write(make_identity(IDENTITY_TYPES, "identity"), args.test_out, "identity")
        write(make_identity(HALF_TYPES, "halves"), args.test_out, "halves")
        write(make_wrong_shape(), args.test_out, "wrong_shape")
        write(make_zeros(), args.test_out, "zeros")
        write(make_spin(), args.test_out, "spin")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
