#include "ocr_steps.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include <opencv2/imgproc.hpp>
#include <polyclipping/clipper.hpp>

namespace ebb::ocr {
namespace {

// PaddleOCR's NormalizeImage for the detector (ImageNet's, applied to B, G, R in that order).
constexpr float kDetMean[3] = {0.485f, 0.456f, 0.406f};
constexpr float kDetStd[3] = {0.229f, 0.224f, 0.225f};
constexpr int kClsHeight = 48, kClsWidth = 192;
constexpr int kRecHeight = 48;
constexpr float kRecMinRatio = 320.0f / 48.0f;

float Distance(cv::Point2f a, cv::Point2f b) { return std::hypot(a.x - b.x, a.y - b.y); }

// Mean of `prob` inside the quad (PaddleOCR's box_score_fast).
float BoxScore(const cv::Mat& prob, const Quad& box) {
  float min_x = box[0].x, max_x = box[0].x, min_y = box[0].y, max_y = box[0].y;
  for (const auto& p : box) {
    min_x = std::min(min_x, p.x), max_x = std::max(max_x, p.x);
    min_y = std::min(min_y, p.y), max_y = std::max(max_y, p.y);
  }
  const int x0 = std::clamp(static_cast<int>(std::floor(min_x)), 0, prob.cols - 1);
  const int x1 = std::clamp(static_cast<int>(std::ceil(max_x)), 0, prob.cols - 1);
  const int y0 = std::clamp(static_cast<int>(std::floor(min_y)), 0, prob.rows - 1);
  const int y1 = std::clamp(static_cast<int>(std::ceil(max_y)), 0, prob.rows - 1);
  cv::Mat mask = cv::Mat::zeros(y1 - y0 + 1, x1 - x0 + 1, CV_8UC1);
  std::vector<cv::Point> poly;
  for (const auto& p : box) poly.emplace_back(static_cast<int>(p.x - x0), static_cast<int>(p.y - y0));
  cv::fillPoly(mask, std::vector<std::vector<cv::Point>>{poly}, cv::Scalar(1));
  return static_cast<float>(cv::mean(prob(cv::Rect(x0, y0, x1 - x0 + 1, y1 - y0 + 1)), mask)[0]);
}

float ShorterSide(const Quad& q) { return std::min(Distance(q[0], q[1]), Distance(q[1], q[2])); }

// Normalises `image` (8-bit BGR, w <= width) into item `n` of an NCHW batch of
// `width`, as (v/255 - 0.5)/0.5, the rest of each row left 0 (padding).
void PutNormalised(const cv::Mat& image, int width, float* batch, int n) {
  const int h = image.rows;
  const size_t plane = static_cast<size_t>(h) * width;
  float* item = batch + static_cast<size_t>(n) * 3 * plane;
  for (int y = 0; y < h; ++y) {
    const uint8_t* row = image.ptr<uint8_t>(y);
    for (int x = 0; x < image.cols; ++x) {
      for (int c = 0; c < 3; ++c) item[c * plane + static_cast<size_t>(y) * width + x] = row[3 * x + c] / 127.5f - 1.0f;
    }
  }
}

// Resized to `height` keeping its aspect ratio, at most `max_width` wide.
cv::Mat ResizeToHeight(const cv::Mat& crop, int height, int max_width) {
  const float ratio = static_cast<float>(crop.cols) / static_cast<float>(crop.rows);
  const int w = std::clamp(static_cast<int>(std::ceil(height * ratio)), 1, max_width);
  cv::Mat out;
  cv::resize(crop, out, cv::Size(w, height));
  return out;
}

}  // namespace

Result<std::vector<std::string>> ReadDictionary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open the OCR dictionary " + path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    keys.push_back(line);
  }
  if (keys.empty()) return InvalidArgument("the OCR dictionary " + path + " is empty");
  return keys;
}

cv::Mat ToBgr(const Image& image) {
  cv::Mat src(image.height, image.width, CV_8UC(image.channels), const_cast<uint8_t*>(image.pixels.data()));
  cv::Mat bgr;
  if (image.channels == 1) cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
  else if (image.channels == 3) cv::cvtColor(src, bgr, cv::COLOR_RGB2BGR);
  else cv::cvtColor(src, bgr, cv::COLOR_RGBA2BGR);
  return bgr;
}

cv::Size DetectorSize(int width, int height, const OcrOptions& options) {
  // RapidOCR's steps of the limit: limit_side_len for small pages, then 1500, then max_side_len.
  const int longer = std::max(width, height);
  const int limit = longer < options.limit_side_len ? options.limit_side_len
                    : longer < 1500                 ? std::min(1500, options.max_side_len)
                                                    : options.max_side_len;
  const double ratio = longer > limit ? static_cast<double>(limit) / longer : 1.0;
  const auto side = [&](int v) { return std::max(static_cast<int>(std::round(v * ratio / 32)) * 32, 32); };
  return {side(width), side(height)};
}

Quad OrderedBox(const std::vector<cv::Point2f>& points) {
  cv::Point2f corners[4];
  cv::minAreaRect(points).points(corners);
  std::sort(corners, corners + 4, [](cv::Point2f a, cv::Point2f b) { return a.x < b.x; });
  // The two leftmost: the upper is the top left; the two rightmost: the upper is the top right.
  const auto [tl, bl] = corners[0].y <= corners[1].y ? std::pair(corners[0], corners[1]) : std::pair(corners[1], corners[0]);
  const auto [tr, br] = corners[2].y <= corners[3].y ? std::pair(corners[2], corners[3]) : std::pair(corners[3], corners[2]);
  return {tl, tr, br, bl};
}

std::vector<cv::Point2f> Unclip(const Quad& box, float ratio) {
  double area = 0, length = 0;
  for (int i = 0; i < 4; ++i) {
    const cv::Point2f a = box[i], b = box[(i + 1) % 4];
    area += static_cast<double>(a.x) * b.y - static_cast<double>(b.x) * a.y;
    length += Distance(a, b);
  }
  area = std::abs(area) / 2;
  if (length <= 0) return {};
  const double distance = area * ratio / length;
  ClipperLib::Path path;
  for (const auto& p : box) path.push_back({static_cast<ClipperLib::cInt>(std::lround(p.x)), static_cast<ClipperLib::cInt>(std::lround(p.y))});
  ClipperLib::ClipperOffset offset;
  offset.AddPath(path, ClipperLib::jtRound, ClipperLib::etClosedPolygon);
  ClipperLib::Paths grown;
  offset.Execute(grown, distance);
  std::vector<cv::Point2f> out;
  if (grown.empty()) return out;
  const auto& largest = *std::max_element(grown.begin(), grown.end(), [](const auto& a, const auto& b) {
    return std::abs(ClipperLib::Area(a)) < std::abs(ClipperLib::Area(b));
  });
  for (const auto& p : largest) out.emplace_back(static_cast<float>(p.X), static_cast<float>(p.Y));
  return out;
}

void SortReadingOrder(std::vector<Quad>& boxes) {
  std::stable_sort(boxes.begin(), boxes.end(), [](const Quad& a, const Quad& b) {
    return a[0].y != b[0].y ? a[0].y < b[0].y : a[0].x < b[0].x;
  });
  for (size_t i = 0; i + 1 < boxes.size(); ++i) {
    for (size_t j = i + 1; j > 0; --j) {
      if (std::abs(boxes[j][0].y - boxes[j - 1][0].y) < 10 && boxes[j][0].x < boxes[j - 1][0].x) {
        std::swap(boxes[j], boxes[j - 1]);
      } else {
        break;
      }
    }
  }
}

std::vector<Quad> DetectBoxes(const float* probability, int h, int w, cv::Size page_size, const OcrOptions& options) {
  const cv::Mat prob(h, w, CV_32FC1, const_cast<float*>(probability));
  cv::Mat bitmap = prob > options.binary_threshold;  // 0 or 255
  if (options.use_dilation) cv::dilate(bitmap, bitmap, cv::Mat::ones(2, 2, CV_8UC1));
  std::vector<std::vector<cv::Point>> contours;
  cv::findContours(bitmap, contours, cv::RETR_LIST, cv::CHAIN_APPROX_SIMPLE);
  const float sx = static_cast<float>(page_size.width) / w, sy = static_cast<float>(page_size.height) / h;
  std::vector<Quad> boxes;
  const size_t n = std::min(contours.size(), static_cast<size_t>(std::max(options.max_candidates, 0)));
  for (size_t i = 0; i < n; ++i) {
    if (contours[i].size() < 3) continue;
    std::vector<cv::Point2f> points(contours[i].begin(), contours[i].end());
    const Quad box = OrderedBox(points);
    if (ShorterSide(box) < options.min_box_side) continue;
    if (BoxScore(prob, box) < options.box_threshold) continue;
    const std::vector<cv::Point2f> grown = Unclip(box, options.unclip_ratio);
    if (grown.size() < 3) continue;
    Quad big = OrderedBox(grown);
    if (ShorterSide(big) < options.min_box_side + 2) continue;
    for (auto& p : big) {
      p.x = std::clamp(std::round(p.x * sx), 0.0f, static_cast<float>(page_size.width - 1));
      p.y = std::clamp(std::round(p.y * sy), 0.0f, static_cast<float>(page_size.height - 1));
    }
    if (static_cast<int>(Distance(big[0], big[1])) <= 3 || static_cast<int>(Distance(big[0], big[3])) <= 3) continue;
    boxes.push_back(big);
  }
  SortReadingOrder(boxes);
  return boxes;
}

cv::Mat CropLine(const cv::Mat& bgr, const Quad& box) {
  const int w = std::max(1, static_cast<int>(std::max(Distance(box[0], box[1]), Distance(box[2], box[3]))));
  const int h = std::max(1, static_cast<int>(std::max(Distance(box[0], box[3]), Distance(box[1], box[2]))));
  const cv::Point2f src[4] = {box[0], box[1], box[2], box[3]};
  const cv::Point2f dst[4] = {{0, 0}, {static_cast<float>(w), 0}, {static_cast<float>(w), static_cast<float>(h)},
                              {0, static_cast<float>(h)}};
  cv::Mat crop;
  cv::warpPerspective(bgr, crop, cv::getPerspectiveTransform(src, dst), cv::Size(w, h), cv::INTER_CUBIC,
                      cv::BORDER_REPLICATE);
  if (static_cast<float>(crop.rows) / static_cast<float>(crop.cols) >= 1.5f) {
    cv::rotate(crop, crop, cv::ROTATE_90_COUNTERCLOCKWISE);
  }
  return crop;
}

PageJob::PageJob(const Image& page, const OcrOptions& options, const std::vector<std::string>& dictionary)
    : options_(options), dictionary_(dictionary), bgr_(ToBgr(page)) {}

Tensor PageJob::DetectorInput() const {
  const cv::Size size = DetectorSize(bgr_.cols, bgr_.rows, options_);
  cv::Mat resized;
  cv::resize(bgr_, resized, size);
  Tensor t(DataType::kFloat32, {1, 3, size.height, size.width});
  float* out = t.values<float>().data();
  const size_t plane = static_cast<size_t>(size.height) * size.width;
  for (int y = 0; y < size.height; ++y) {
    const uint8_t* row = resized.ptr<uint8_t>(y);
    for (int x = 0; x < size.width; ++x) {
      for (int c = 0; c < 3; ++c) {
        out[c * plane + static_cast<size_t>(y) * size.width + x] = (row[3 * x + c] / 255.0f - kDetMean[c]) / kDetStd[c];
      }
    }
  }
  return t;
}

Status PageJob::TakeDetector(const Tensor& output) {
  const Shape& s = output.shape();
  if (output.type() != DataType::kFloat32 || s.size() != 4 || s[0] != 1 || s[1] != 1) {
    return InvalidArgument("the OCR detector's output is " + ShapeToString(s) + ", not [1,1,h,w] float");
  }
  boxes_ = DetectBoxes(output.values<float>().data(), static_cast<int>(s[2]), static_cast<int>(s[3]), bgr_.size(),
                       options_);
  crops_.clear();
  for (const Quad& b : boxes_) crops_.push_back(CropLine(bgr_, b));
  std::vector<int> order(crops_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return static_cast<float>(crops_[a].cols) / crops_[a].rows < static_cast<float>(crops_[b].cols) / crops_[b].rows;
  });
  cls_order_ = options_.use_classifier ? order : std::vector<int>{};
  rec_order_ = order;  // a 180° turn keeps the aspect ratio
  upside_down_.assign(crops_.size(), false);
  text_.assign(crops_.size(), {});
  confidence_.assign(crops_.size(), 0.0f);
  return Status::Ok();
}

int PageJob::classifier_batches() const {
  return static_cast<int>((cls_order_.size() + options_.cls_batch - 1) / options_.cls_batch);
}
int PageJob::recognizer_batches() const {
  return static_cast<int>((rec_order_.size() + options_.rec_batch - 1) / options_.rec_batch);
}

std::vector<int> PageJob::Batch(const std::vector<int>& order, int batch, int size) const {
  const size_t begin = static_cast<size_t>(batch) * size;
  const size_t end = std::min(order.size(), begin + size);
  return {order.begin() + static_cast<std::ptrdiff_t>(begin), order.begin() + static_cast<std::ptrdiff_t>(end)};
}

Tensor PageJob::ClassifierInput(int batch) const {
  const std::vector<int> items = Batch(cls_order_, batch, options_.cls_batch);
  Tensor t(DataType::kFloat32, {static_cast<int64_t>(items.size()), 3, kClsHeight, kClsWidth});
  std::fill(t.values<float>().begin(), t.values<float>().end(), 0.0f);
  for (size_t n = 0; n < items.size(); ++n) {
    PutNormalised(ResizeToHeight(crops_[items[n]], kClsHeight, kClsWidth), kClsWidth, t.values<float>().data(),
                  static_cast<int>(n));
  }
  return t;
}

Status PageJob::TakeClassifier(int batch, const Tensor& output) {
  const std::vector<int> items = Batch(cls_order_, batch, options_.cls_batch);
  const Shape& s = output.shape();
  if (output.type() != DataType::kFloat32 || s.size() != 2 || s[0] != static_cast<int64_t>(items.size()) || s[1] != 2) {
    return InvalidArgument("the OCR classifier's output is " + ShapeToString(s) + ", not [n,2] float");
  }
  const auto p = output.values<float>();
  for (size_t n = 0; n < items.size(); ++n) {
    upside_down_[items[n]] = p[2 * n + 1] > p[2 * n] && p[2 * n + 1] > options_.cls_threshold;
  }
  if (batch + 1 < classifier_batches()) return Status::Ok();
  // All classified. By the page's majority: every line turned when at least half are classed 180°, none
  // otherwise; else (PaddleOCR's rule) each line classed 180° on its own.
  if (options_.cls_page_majority) {
    const size_t turned = static_cast<size_t>(std::count(upside_down_.begin(), upside_down_.end(), true));
    upside_down_.assign(crops_.size(), 2 * turned >= cls_order_.size());
  }
  for (size_t i = 0; i < crops_.size(); ++i) {
    if (upside_down_[i]) cv::rotate(crops_[i], crops_[i], cv::ROTATE_180);
  }
  return Status::Ok();
}

Tensor PageJob::RecognizerInput(int batch) const {
  const std::vector<int> items = Batch(rec_order_, batch, options_.rec_batch);
  float max_ratio = kRecMinRatio;
  for (int i : items) max_ratio = std::max(max_ratio, static_cast<float>(crops_[i].cols) / crops_[i].rows);
  const int width = static_cast<int>(kRecHeight * max_ratio);
  Tensor t(DataType::kFloat32, {static_cast<int64_t>(items.size()), 3, kRecHeight, width});
  std::fill(t.values<float>().begin(), t.values<float>().end(), 0.0f);
  for (size_t n = 0; n < items.size(); ++n) {
    PutNormalised(ResizeToHeight(crops_[items[n]], kRecHeight, width), width, t.values<float>().data(),
                  static_cast<int>(n));
  }
  return t;
}

Status PageJob::TakeRecognizer(int batch, const Tensor& output) {
  const std::vector<int> items = Batch(rec_order_, batch, options_.rec_batch);
  const Shape& s = output.shape();
  const int64_t classes = static_cast<int64_t>(dictionary_.size()) + 2;  // blank, the dictionary, a space
  if (output.type() != DataType::kFloat32 || s.size() != 3 || s[0] != static_cast<int64_t>(items.size()) ||
      s[2] != classes) {
    return InvalidArgument("the OCR recogniser's output is " + ShapeToString(s) + ", not [n,T," +
                           std::to_string(classes) + "] float");
  }
  const float* p = output.values<float>().data();
  for (size_t n = 0; n < items.size(); ++n) {
    std::string text;
    double sum = 0;
    int kept = 0;
    int64_t previous = -1;
    for (int64_t t = 0; t < s[1]; ++t) {
      const float* step = p + (static_cast<int64_t>(n) * s[1] + t) * classes;
      const int64_t best = std::max_element(step, step + classes) - step;
      if (best != 0 && best != previous) {
        text += best == classes - 1 ? std::string(" ") : dictionary_[best - 1];
        sum += step[best];
        ++kept;
      }
      previous = best;
    }
    text_[items[n]] = std::move(text);
    confidence_[items[n]] = kept > 0 ? static_cast<float>(sum / kept) : 0.0f;
  }
  return Status::Ok();
}

OcrPage PageJob::Finish() const {
  OcrPage page;
  for (size_t i = 0; i < boxes_.size(); ++i) {
    if (text_[i].empty() || confidence_[i] < options_.drop_score) continue;
    OcrLine line;
    line.text = text_[i];
    line.confidence = confidence_[i];
    for (int k = 0; k < 4; ++k) line.box[k] = {boxes_[i][k].x, boxes_[i][k].y};
    page.lines.push_back(std::move(line));
  }
  return page;
}

}  // namespace ebb::ocr
