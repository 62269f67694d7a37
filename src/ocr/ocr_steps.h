// Internal: the pre- and post-processing steps of the OCR pipeline
// (include/ebb/ocr.h lists them), apart from how the models are run, so that
// the library's pipeline and the benchmark's plain-ORT baselines
// (src/ocr/bare_ocr.h) share every line of them.
//
// A PageJob is one page's state: it makes the detector's input, takes its
// output (boxes, crops), then makes and takes each classifier and recogniser
// batch in turn, and gives the page's lines at the end. Batches are numbered
// 0..n-1 and must be run in order, classifier batches before recogniser ones.
// Thread safety: none; one PageJob per thread.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "ebb/image.h"
#include "ebb/ocr.h"
#include "ebb/tensor.h"

namespace ebb::ocr {

using Quad = std::array<cv::Point2f, 4>;  // clockwise from the top left

// The dictionary's lines (UTF-8, one character each; "\r" stripped).
// Errors: kNotFound, kInvalidArgument (empty).
Result<std::vector<std::string>> ReadDictionary(const std::string& path);

// An ebb Image as an 8-bit BGR matrix (gray replicated, alpha dropped).
cv::Mat ToBgr(const Image& image);

// The detector's input size for a page of w x h: both multiples of 32, at
// least 32, the longer side at most limit_side_len (960) for pages under it,
// 1500 under 1500 px, else max_side_len (2000): RapidOCR's limit, over
// PaddleOCR's DetResizeForTest (limit type "max"). Never upscaled.
cv::Size DetectorSize(int width, int height, const OcrOptions& options);

// DB post-processing of a probability map [h,w] for a page of page_size:
// boxes in the page's pixels, in reading order.
std::vector<Quad> DetectBoxes(const float* probability, int h, int w, cv::Size page_size, const OcrOptions& options);

// Minimum-area rectangle of `points` as a quad clockwise from the top left.
Quad OrderedBox(const std::vector<cv::Point2f>& points);

// Grows a quad outward by area * ratio / perimeter (Clipper, round joins).
std::vector<cv::Point2f> Unclip(const Quad& box, float ratio);

// Sorts boxes into reading order (top to bottom; left to right within 10 px).
void SortReadingOrder(std::vector<Quad>& boxes);

// The quad cut out of `bgr` and rectified; turned 90° anticlockwise when at
// least 1.5 times taller than wide.
cv::Mat CropLine(const cv::Mat& bgr, const Quad& box);

class PageJob {
 public:
  PageJob(const Image& page, const OcrOptions& options, const std::vector<std::string>& dictionary);

  Tensor DetectorInput() const;
  // REQUIRES: output [1,1,h,w] float.
  Status TakeDetector(const Tensor& output);

  int classifier_batches() const;
  int recognizer_batches() const;
  Tensor ClassifierInput(int batch) const;
  Status TakeClassifier(int batch, const Tensor& output);  // [n,2]
  Tensor RecognizerInput(int batch) const;
  Status TakeRecognizer(int batch, const Tensor& output);  // [n,T,classes]

  // The page's lines, confident enough, in reading order.
  OcrPage Finish() const;

 private:
  std::vector<int> Batch(const std::vector<int>& order, int batch, int size) const;

  const OcrOptions& options_;
  const std::vector<std::string>& dictionary_;
  cv::Mat bgr_;
  std::vector<Quad> boxes_;
  std::vector<cv::Mat> crops_;
  std::vector<int> cls_order_, rec_order_;  // crop indices by aspect ratio
  std::vector<bool> upside_down_;  // classed 180° above the threshold
  std::vector<std::string> text_;
  std::vector<float> confidence_;
};

}  // namespace ebb::ocr
