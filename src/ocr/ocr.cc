// The OCR pipeline (include/ebb/ocr.h): the steps of src/ocr/ocr_steps.h run
// as one ebb operation per call.
#include "ebb/ocr.h"

#include "ocr_steps.h"

namespace ebb {
namespace {

std::vector<NamedTensor> Input(const Session& session, Tensor t) {
  std::vector<NamedTensor> in;
  in.push_back({session.inputs()[0].name, std::move(t)});
  return in;
}

Status CheckImage(const Image& image, size_t index) {
  if (image.width <= 0 || image.height <= 0 || (image.channels != 1 && image.channels != 3 && image.channels != 4) ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * image.channels) {
    return InvalidArgument("OCR page " + std::to_string(index) + " is not a valid image");
  }
  return Status::Ok();
}

}  // namespace

struct OcrPipeline::Impl {
  Runtime* runtime = nullptr;
  OcrOptions options;
  std::shared_ptr<Session> det, cls, rec;
  std::vector<std::string> dictionary;
};

OcrPipeline::OcrPipeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OcrPipeline::~OcrPipeline() = default;

Result<std::unique_ptr<OcrPipeline>> OcrPipeline::Load(Runtime& runtime, const std::string& folder,
                                                        const OcrOptions& options, const LoadOptions& load) {
  Result<OcrModelFiles> files = ReadOcrFolder(folder);
  if (!files.ok()) return files.status();
  return Load(runtime, *files, options, load);
}

Result<std::unique_ptr<OcrPipeline>> OcrPipeline::Load(Runtime& runtime, const OcrModelFiles& files,
                                                        const OcrOptions& options, const LoadOptions& load) {
  std::shared_ptr<Session> sessions[3];
  const std::string* paths[3] = {&files.detector, &files.classifier, &files.recognizer};
  const char* names[3] = {"detector", "classifier", "recognizer"};
  for (int i = 0; i < 3; ++i) {
    LoadOptions lo = load;
    if (lo.name.empty()) lo.name = std::string("ocr_") + names[i];
    if (!lo.graph_optimization) lo.graph_optimization = files.graph_optimization;
    Result<std::shared_ptr<Session>> s = runtime.Load(*paths[i], lo);
    if (!s.ok()) return Status(s.status().code(), "OCR " + std::string(names[i]) + ": " + s.status().message());
    sessions[i] = std::move(s).value();
  }
  return Create(runtime, sessions[0], sessions[1], sessions[2], files.dictionary, options);
}

Result<std::unique_ptr<OcrPipeline>> OcrPipeline::Create(Runtime& runtime, std::shared_ptr<Session> detector,
                                                          std::shared_ptr<Session> classifier,
                                                          std::shared_ptr<Session> recognizer,
                                                          const std::string& dictionary, const OcrOptions& options) {
  if (options.cls_batch < 1 || options.rec_batch < 1 || options.limit_side_len < 32 || options.max_side_len < 32) {
    return InvalidArgument("OCR options: batch sizes must be at least 1 and side limits at least 32");
  }
  auto impl = std::make_unique<Impl>();
  impl->runtime = &runtime;
  impl->options = options;
  Result<std::vector<std::string>> keys = ocr::ReadDictionary(dictionary);
  if (!keys.ok()) return keys.status();
  impl->dictionary = std::move(keys).value();
  impl->det = std::move(detector);
  impl->cls = std::move(classifier);
  impl->rec = std::move(recognizer);
  for (const auto& s : {impl->det, impl->cls, impl->rec}) {
    if (!s || s->inputs().empty() || s->outputs().empty()) {
      return InvalidArgument("OCR model '" + (s ? s->name() : std::string("(none)")) + "' has no input or no output");
    }
  }
  const Shape& rec_out = impl->rec->outputs()[0].shape;
  const int64_t classes = static_cast<int64_t>(impl->dictionary.size()) + 2;
  if (rec_out.size() != 3 || (rec_out[2] >= 0 && rec_out[2] != classes)) {
    return InvalidArgument("OCR dictionary " + dictionary + " has " + std::to_string(impl->dictionary.size()) +
                           " characters, but the recogniser's output " + ShapeToString(rec_out) +
                           " needs its class count minus 2 (the blank and the space)");
  }
  return std::unique_ptr<OcrPipeline>(new OcrPipeline(std::move(impl)));
}

const OcrOptions& OcrPipeline::options() const { return impl_->options; }

std::vector<std::shared_ptr<Session>> OcrPipeline::sessions() const { return {impl_->det, impl_->cls, impl_->rec}; }

Result<std::vector<OcrPage>> OcrPipeline::Recognise(const std::vector<Image>& pages, const OperationOptions& options) {
  for (size_t i = 0; i < pages.size(); ++i) EBB_RETURN_IF_ERROR(CheckImage(pages[i], i));
  Impl& m = *impl_;
  std::vector<OcrPage> results(pages.size());
  std::unique_ptr<ocr::PageJob> job;  // the page in progress (one at a time)
  Operation op(*m.runtime, options);
  for (size_t p = 0; p < pages.size(); ++p) {
    op.AddStep(
        m.det,
        [&, p]() -> Result<std::vector<NamedTensor>> {
          job = std::make_unique<ocr::PageJob>(pages[p], m.options, m.dictionary);
          return Input(*m.det, job->DetectorInput());
        },
        [&, p](std::vector<NamedTensor> out) -> Status {
          EBB_RETURN_IF_ERROR(job->TakeDetector(out[0].tensor));
          const int cls = job->classifier_batches(), rec = job->recognizer_batches();
          for (int b = 0; b < cls; ++b) {
            op.AddStep(
                m.cls, [&, b]() -> Result<std::vector<NamedTensor>> { return Input(*m.cls, job->ClassifierInput(b)); },
                [&, b](std::vector<NamedTensor> o) { return job->TakeClassifier(b, o[0].tensor); },
                {m.cls->outputs()[0].name});
          }
          for (int b = 0; b < rec; ++b) {
            const bool last = b == rec - 1;
            op.AddStep(
                m.rec, [&, b]() -> Result<std::vector<NamedTensor>> { return Input(*m.rec, job->RecognizerInput(b)); },
                [&, b, p, last](std::vector<NamedTensor> o) -> Status {
                  EBB_RETURN_IF_ERROR(job->TakeRecognizer(b, o[0].tensor));
                  if (last) results[p] = job->Finish();
                  return Status::Ok();
                },
                {m.rec->outputs()[0].name});
          }
          if (rec == 0) results[p] = job->Finish();
          return Status::Ok();
        },
        {m.det->outputs()[0].name}, /*may_add_steps=*/true);
  }
  EBB_RETURN_IF_ERROR(op.Execute());
  return results;
}

}  // namespace ebb
