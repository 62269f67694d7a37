#include "ocr_model.h"

#include <algorithm>

namespace ebb::server {

Result<std::shared_ptr<OcrPipeline>> OcrModels::PipelineFor(const std::string& model, const std::string& folder,
                                                             const std::shared_ptr<Session>& detector) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(model);
    if (it != cache_.end() && it->second.detector == detector.get()) return it->second.pipeline;
  }
  Result<OcrModelFiles> files = ReadOcrFolder(folder);
  if (!files.ok()) return files.status();
  const LoadOptions cls_options{.name = "ocr_classifier", .graph_optimization = files->graph_optimization};
  Result<std::shared_ptr<Session>> cls = runtime_.Load(files->classifier, cls_options);
  if (!cls.ok()) return cls.status();
  const LoadOptions rec_options{.name = "ocr_recognizer", .graph_optimization = files->graph_optimization};
  Result<std::shared_ptr<Session>> rec = runtime_.Load(files->recognizer, rec_options);
  if (!rec.ok()) return rec.status();
  Result<std::unique_ptr<OcrPipeline>> made = OcrPipeline::Create(runtime_, detector, *cls, *rec, files->dictionary);
  if (!made.ok()) return made.status();
  std::shared_ptr<OcrPipeline> pipeline = std::move(made).value();
  std::lock_guard<std::mutex> lock(mu_);
  cache_[model] = {detector.get(), pipeline};
  return pipeline;
}

void OcrModels::Forget(const std::string& model) {
  std::shared_ptr<OcrPipeline> pipeline;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(model);
    if (it == cache_.end()) return;
    pipeline = std::move(it->second.pipeline);
    cache_.erase(it);
  }
  const std::vector<std::shared_ptr<Session>> sessions = pipeline->sessions();
  for (size_t i = 1; i < sessions.size(); ++i) (void)runtime_.Unload(*sessions[i]);  // the detector is the pool's
}

Result<std::vector<NamedTensor>> OcrModels::Execute(const std::string& model, const std::string& folder,
                                                    const std::shared_ptr<Session>& detector,
                                                    const InferRequest& request, const OperationOptions& options) {
  if (request.inputs.size() != 1 || request.inputs[0].name != "image" ||
      request.inputs[0].tensor.type() != DataType::kBytes) {
    return InvalidArgument("model '" + model + "' takes one input, 'image': BYTES, one encoded image file (PNG or JPEG) per element");
  }
  static const std::vector<std::string> kOutputs = {"text", "boxes", "confidence", "image"};
  for (const std::string& wanted : request.outputs) {
    if (std::find(kOutputs.begin(), kOutputs.end(), wanted) == kOutputs.end()) {
      return InvalidArgument("model '" + model + "' has no output '" + Clip(wanted) +
                             "' (its outputs: text, boxes, confidence, image)");
    }
  }
  std::vector<Image> pages;
  const std::vector<std::string_view> files = request.inputs[0].tensor.strings();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::vector<uint8_t> bytes(files[i].begin(), files[i].end());
    Result<Image> image = DecodeImage(bytes, "in input 'image', element " + std::to_string(i));
    if (!image.ok()) return image.status();
    pages.push_back(std::move(image).value());
  }
  Result<std::shared_ptr<OcrPipeline>> pipeline = PipelineFor(model, folder, detector);
  if (!pipeline.ok()) return pipeline.status();
  Result<std::vector<OcrPage>> result = (*pipeline)->Recognise(pages, options);
  if (!result.ok()) return result.status();

  std::vector<std::string> text;
  std::vector<float> boxes, confidence;
  std::vector<int64_t> image;
  for (size_t p = 0; p < result->size(); ++p) {
    for (const OcrLine& line : (*result)[p].lines) {
      text.push_back(line.text);
      for (const auto& pt : line.box) boxes.insert(boxes.end(), {pt[0], pt[1]});
      confidence.push_back(line.confidence);
      image.push_back(static_cast<int64_t>(p));
    }
  }
  const int64_t lines = static_cast<int64_t>(text.size());
  std::vector<NamedTensor> all;
  all.push_back({"text", Tensor::FromStrings({lines}, text)});
  all.push_back({"boxes", Tensor::FromFloats({lines, 4, 2}, boxes)});
  all.push_back({"confidence", Tensor::FromFloats({lines}, confidence)});
  Tensor index(DataType::kInt64, {lines});
  std::copy(image.begin(), image.end(), index.values<int64_t>().begin());
  all.push_back({"image", std::move(index)});
  if (request.outputs.empty()) return all;
  std::vector<NamedTensor> chosen;
  for (const std::string& wanted : request.outputs) {
    for (NamedTensor& t : all) {
      if (t.name == wanted) chosen.push_back({t.name, t.tensor.Clone()});
    }
  }
  return chosen;
}

}  // namespace ebb::server
