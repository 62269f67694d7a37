#include "bare_ort.h"

#include <cstring>

#include "ort_api.h"
#include "ort_context.h"
#include "port.h"
#include "session_factory.h"

namespace ebb::detail {

struct BareOrtModel::Impl {
  std::unique_ptr<Ort::Session> session;
  std::vector<std::string> output_names;
};

namespace {

// The process's plain ORT environment, created on first use and kept (an
// application creates its env once).
Ort::Env& PlainEnv() {
  static Ort::Env env = [] {
    OptOutOfOrtTelemetry();               // as ebb's own environment, so that either may come first
    const port::OrtStderrSilenced quiet;  // as ebb's own environment (port.h)
    return Ort::Env(ORT_LOGGING_LEVEL_FATAL, "ebb-bench-plain-ort");
  }();
  return env;
}

}  // namespace

void BareOrtModel::CreateEnvironment() { (void)PlainEnv(); }

BareOrtModel::BareOrtModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BareOrtModel::~BareOrtModel() = default;

Result<std::unique_ptr<BareOrtModel>> BareOrtModel::Load(const std::string& path, GraphOptimization level,
                                                         bool cpu_arena) {
  auto impl = std::make_unique<Impl>();
  std::vector<TensorInfo> inputs;
  try {
    Ort::SessionOptions options;
    options.SetGraphOptimizationLevel(ToOrtLevel(level));
    if (!cpu_arena) options.DisableCpuMemArena();
    impl->session = std::make_unique<Ort::Session>(PlainEnv(), port::OrtPath(path).c_str(), options);
    Ort::AllocatorWithDefaultOptions allocator;
    for (size_t i = 0; i < impl->session->GetInputCount(); ++i) {
      Ort::TypeInfo type_info = impl->session->GetInputTypeInfo(i);
      auto info = type_info.GetTensorTypeAndShapeInfo();
      std::optional<DataType> type = FromOnnxType(info.GetElementType());
      if (!type) return InvalidArgument("input " + std::to_string(i) + " has a type ebb does not support");
      inputs.push_back({impl->session->GetInputNameAllocated(i, allocator).get(), *type, info.GetShape()});
    }
    for (size_t i = 0; i < impl->session->GetOutputCount(); ++i) {
      impl->output_names.push_back(impl->session->GetOutputNameAllocated(i, allocator).get());
    }
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "plain ORT: loading '" + path + "'", "CPU memory");
  }
  std::unique_ptr<BareOrtModel> model(new BareOrtModel(std::move(impl)));
  model->inputs_ = std::move(inputs);
  return model;
}

Status BareOrtModel::Run(const std::vector<NamedTensor>& inputs) {
  Result<std::vector<NamedTensor>> out = RunImpl(inputs, /*copy=*/false);
  return out.ok() ? Status::Ok() : out.status();
}

Result<std::vector<NamedTensor>> BareOrtModel::RunCopy(const std::vector<NamedTensor>& inputs) {
  return RunImpl(inputs, /*copy=*/true);
}

Result<std::vector<NamedTensor>> BareOrtModel::RunImpl(const std::vector<NamedTensor>& inputs, bool copy) {
  static const Ort::MemoryInfo host = Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault);
  std::vector<const char*> in_names, out_names;
  std::vector<Ort::Value> values;
  for (const NamedTensor& t : inputs) {
    in_names.push_back(t.name.c_str());
    values.push_back(Ort::Value::CreateTensor(host, const_cast<std::byte*>(t.tensor.data()), t.tensor.byte_size(),
                                              t.tensor.shape().data(), t.tensor.shape().size(),
                                              ToOnnxType(t.tensor.type())));
  }
  for (const std::string& n : impl_->output_names) out_names.push_back(n.c_str());
  std::vector<NamedTensor> copied;
  try {
    auto outputs = impl_->session->Run(Ort::RunOptions{}, in_names.data(), values.data(), values.size(),
                                       out_names.data(), out_names.size());
    for (size_t i = 0; copy && i < outputs.size(); ++i) {
      auto info = outputs[i].GetTensorTypeAndShapeInfo();
      std::optional<DataType> type = FromOnnxType(info.GetElementType());
      if (!type || *type == DataType::kBytes) return InvalidArgument("plain ORT: output of an unsupported type");
      Tensor t(*type, info.GetShape());
      std::memcpy(t.data(), outputs[i].GetTensorRawData(), t.byte_size());
      copied.push_back({impl_->output_names[i], std::move(t)});
    }
  } catch (const Ort::Exception& e) {
    return StatusFromOrt(e, "plain ORT: run", "CPU memory");
  }
  return copied;
}

}  // namespace ebb::detail
