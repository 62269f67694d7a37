#include "bare_ocr.h"

#include "bare_ort.h"
#include "ocr_steps.h"

namespace ebb::detail {

struct BareOcr::Impl {
  std::unique_ptr<BareOrtModel> det, cls, rec;
  std::vector<std::string> dictionary;
  OcrOptions options;
};

BareOcr::BareOcr(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BareOcr::~BareOcr() = default;

Result<std::unique_ptr<BareOcr>> BareOcr::Load(const OcrModelFiles& files, bool cpu_arena) {
  auto impl = std::make_unique<Impl>();
  Result<std::vector<std::string>> keys = ocr::ReadDictionary(files.dictionary);
  if (!keys.ok()) return keys.status();
  impl->dictionary = std::move(keys).value();
  for (auto [path, out] : {std::pair{&files.detector, &impl->det}, std::pair{&files.classifier, &impl->cls},
                           std::pair{&files.recognizer, &impl->rec}}) {
    auto model = BareOrtModel::Load(*path, GraphOptimization::kAll, cpu_arena);
    if (!model.ok()) return model.status();
    *out = std::move(model).value();
  }
  return std::unique_ptr<BareOcr>(new BareOcr(std::move(impl)));
}

namespace {

Result<Tensor> RunOne(BareOrtModel& model, Tensor input) {
  std::vector<NamedTensor> in;
  in.push_back({model.inputs()[0].name, std::move(input)});
  Result<std::vector<NamedTensor>> out = model.RunCopy(in);
  if (!out.ok()) return out.status();
  return std::move((*out)[0].tensor);
}

}  // namespace

Result<OcrPage> BareOcr::Recognise(const Image& page) {
  Impl& m = *impl_;
  ocr::PageJob job(page, m.options, m.dictionary);
  Result<Tensor> det = RunOne(*m.det, job.DetectorInput());
  if (!det.ok()) return det.status();
  EBB_RETURN_IF_ERROR(job.TakeDetector(*det));
  for (int b = 0; b < job.classifier_batches(); ++b) {
    Result<Tensor> out = RunOne(*m.cls, job.ClassifierInput(b));
    if (!out.ok()) return out.status();
    EBB_RETURN_IF_ERROR(job.TakeClassifier(b, *out));
  }
  for (int b = 0; b < job.recognizer_batches(); ++b) {
    Result<Tensor> out = RunOne(*m.rec, job.RecognizerInput(b));
    if (!out.ok()) return out.status();
    EBB_RETURN_IF_ERROR(job.TakeRecognizer(b, *out));
  }
  return job.Finish();
}

}  // namespace ebb::detail
