// The C++ side of "outputs equal to the C++ run": runs a model through the C++
// library (ebb::Runtime, ebb::Session::Run) on the inputs of tests/c/fill.h and
// writes every output's bytes, in model order, to a file. The C tests
// (c_api_test) and the Java tests compare their own outputs with it bit for bit.
//
//   cxx_reference MODEL OUT_FILE NAME:TYPE:D0xD1x...[:SEED] ...
//   e.g. cxx_reference models/convnet/model.onnx y.bin x:FP32:1x3x64x48
//
// Exit status 0, or 1 with the error on stderr.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ebb/runtime.h"
#include "fill.h"

namespace {

// "x:FP32:1x3x64x48[:seed]" -> the filled input.
ebb::Result<ebb::NamedTensor> ParseInput(const std::string& arg) {
  std::vector<std::string> parts;
  std::stringstream in(arg);
  for (std::string p; std::getline(in, p, ':');) parts.push_back(p);
  if (parts.size() < 3) return ebb::InvalidArgument("an input is NAME:TYPE:D0xD1x...[:SEED], not '" + arg + "'");
  std::optional<ebb::DataType> type = ebb::ParseDataType(parts[1]);
  if (!type) return ebb::InvalidArgument("unknown type '" + parts[1] + "'");
  ebb::Shape shape;
  std::stringstream dims(parts[2]);
  for (std::string d; std::getline(dims, d, 'x');) shape.push_back(std::stoll(d));
  const uint32_t seed = parts.size() > 3 ? static_cast<uint32_t>(std::stoul(parts[3])) : 0;
  ebb::Tensor t(*type, shape);
  if (!ebb_test_fill(static_cast<ebb_dtype_t>(static_cast<int>(*type)), t.data(),
                     static_cast<size_t>(t.element_count()), seed)) {
    return ebb::InvalidArgument("fill.h does not fill " + parts[1]);
  }
  return ebb::NamedTensor{parts[0], std::move(t)};
}

int Fail(const std::string& message) {
  std::cerr << "cxx_reference: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) return Fail("usage: cxx_reference MODEL OUT_FILE NAME:TYPE:DIMS[:SEED] ...");
  std::vector<ebb::NamedTensor> inputs;
  for (int i = 3; i < argc; ++i) {
    auto input = ParseInput(argv[i]);
    if (!input.ok()) return Fail(input.status().ToString());
    inputs.push_back(std::move(input).value());
  }
  auto runtime = ebb::Runtime::Create();
  if (!runtime.ok()) return Fail(runtime.status().ToString());
  auto session = (*runtime)->Load(argv[1]);
  if (!session.ok()) return Fail(session.status().ToString());
  auto outputs = (*session)->Run(inputs);
  if (!outputs.ok()) return Fail(outputs.status().ToString());
  std::ofstream out(argv[2], std::ios::binary);
  for (const ebb::NamedTensor& o : *outputs) {
    out.write(reinterpret_cast<const char*>(o.tensor.data()), static_cast<std::streamsize>(o.tensor.byte_size()));
  }
  if (!out) return Fail(std::string("cannot write ") + argv[2]);
  return 0;
}
