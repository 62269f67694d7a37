// The OCR pipeline (ebb/ocr.h, src/ocr/): its geometry against known
// shapes (OpenCV's and Clipper's results as the steps use them), CTC decoding,
// and ONE operation per call on the real PP-OCR models: every page's runs
// release once, at the end, also when the last page has no text (the
// operation grows while it runs, ebb/operation.h). Accuracy on rendered
// pages is tests/ocr/ocr_accuracy_test.py's.
#include <gtest/gtest.h>

#include <opencv2/imgproc.hpp>

#include "ebb/ocr.h"
#include "ocr_steps.h"

namespace ebb {
namespace {

const std::string kPipeline = std::string(EBB_MODELS_DIR) + "/ocr";

TEST(OcrGeometry, DetectorSizeIsMultipleOf32WithinTheLimits) {
  OcrOptions o;
  EXPECT_EQ(ocr::DetectorSize(100, 50, o), cv::Size(96, 64));        // no upscaling: rounded to 32s, at least 32
  EXPECT_EQ(ocr::DetectorSize(10, 10, o), cv::Size(32, 32));
  EXPECT_EQ(ocr::DetectorSize(1240, 1754, o), cv::Size(1248, 1760));  // under 2000: as it is
  EXPECT_EQ(ocr::DetectorSize(2480, 3508, o), cv::Size(1408, 2016));  // longer side limited to 2000 (+ rounding)
  EXPECT_EQ(ocr::DetectorSize(1200, 1000, o), cv::Size(1216, 992));   // under 1500: as it is, rounded
  o.max_side_len = 960;
  EXPECT_EQ(ocr::DetectorSize(2480, 3508, o), cv::Size(672, 960));    // PaddleOCR's 960 alone
}

TEST(OcrGeometry, OrderedBoxIsClockwiseFromTopLeft) {
  const ocr::Quad q = ocr::OrderedBox({{10, 20}, {110, 20}, {110, 50}, {10, 50}, {60, 35}});
  EXPECT_EQ(q[0], cv::Point2f(10, 20));
  EXPECT_EQ(q[1], cv::Point2f(110, 20));
  EXPECT_EQ(q[2], cv::Point2f(110, 50));
  EXPECT_EQ(q[3], cv::Point2f(10, 50));
}

TEST(OcrGeometry, UnclipGrowsByAreaTimesRatioOverPerimeter) {
  // 100 x 30: area 3000, perimeter 260, ratio 1.5: distance 17.3 on every side.
  const ocr::Quad box = {cv::Point2f(100, 100), cv::Point2f(200, 100), cv::Point2f(200, 130), cv::Point2f(100, 130)};
  const ocr::Quad grown = ocr::OrderedBox(ocr::Unclip(box, 1.5f));
  const float d = 3000.0f * 1.5f / 260.0f;
  EXPECT_NEAR(grown[0].x, 100 - d, 1.0);
  EXPECT_NEAR(grown[0].y, 100 - d, 1.0);
  EXPECT_NEAR(grown[2].x, 200 + d, 1.0);
  EXPECT_NEAR(grown[2].y, 130 + d, 1.0);
}

TEST(OcrGeometry, DilationJoinsRegionsOneColumnApart) {
  // Two confident blocks with one column between them (x 56): two regions as binarised, one once the
  // binary map is dilated by RapidOCR's 2x2 kernel (the gap between two words, as the map has them).
  cv::Mat prob(40, 120, CV_32FC1, cv::Scalar(0.0f));
  prob(cv::Rect(10, 10, 46, 16)).setTo(0.9f);
  prob(cv::Rect(57, 10, 53, 16)).setTo(0.9f);
  OcrOptions options;
  options.use_dilation = false;
  EXPECT_EQ(ocr::DetectBoxes(prob.ptr<float>(), prob.rows, prob.cols, prob.size(), options).size(), 2u);
  options.use_dilation = true;
  const std::vector<ocr::Quad> joined = ocr::DetectBoxes(prob.ptr<float>(), prob.rows, prob.cols, prob.size(), options);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_LE(joined[0][0].x, 10);  // spans both blocks (grown by the unclip ratio)
  EXPECT_GE(joined[0][1].x, 109);
}

TEST(OcrGeometry, ReadingOrderIsTopToBottomThenLeftToRight) {
  auto at = [](float x, float y) {
    return ocr::Quad{cv::Point2f(x, y), cv::Point2f(x + 50, y), cv::Point2f(x + 50, y + 20), cv::Point2f(x, y + 20)};
  };
  std::vector<ocr::Quad> boxes = {at(300, 104), at(10, 200), at(10, 100), at(150, 98)};
  ocr::SortReadingOrder(boxes);
  ASSERT_EQ(boxes.size(), 4u);
  EXPECT_EQ(boxes[0][0], cv::Point2f(10, 100));  // tops within 10 px: one line, left to right
  EXPECT_EQ(boxes[1][0], cv::Point2f(150, 98));
  EXPECT_EQ(boxes[2][0], cv::Point2f(300, 104));
  EXPECT_EQ(boxes[3][0], cv::Point2f(10, 200));
}

TEST(OcrGeometry, CropOfARotatedBoxIsRectifiedAndTallOnesTurnedUpright) {
  cv::Mat page(200, 200, CV_8UC3, cv::Scalar(255, 255, 255));
  const ocr::Quad tall = {cv::Point2f(50, 20), cv::Point2f(80, 20), cv::Point2f(80, 180), cv::Point2f(50, 180)};
  const cv::Mat crop = ocr::CropLine(page, tall);
  EXPECT_EQ(crop.cols, 160);  // 30 x 160 turned by 90 degrees
  EXPECT_EQ(crop.rows, 30);
}

TEST(OcrDecoding, CtcGreedyDropsBlanksAndRepeats) {
  const std::vector<std::string> dictionary = {"a", "b", "c"};  // classes: blank, a, b, c, space
  OcrOptions options;
  Image page{64, 32, 3, std::vector<uint8_t>(64 * 32 * 3, 255)};
  ocr::PageJob job(page, options, dictionary);
  // A detector output with one confident rectangle, so that one crop is made.
  Tensor det(DataType::kFloat32, {1, 1, 32, 64});
  auto p = det.values<float>();
  std::fill(p.begin(), p.end(), 0.0f);
  for (int y = 10; y < 22; ++y) {
    for (int x = 8; x < 56; ++x) p[y * 64 + x] = 0.9f;
  }
  ASSERT_TRUE(job.TakeDetector(det).ok());
  ASSERT_EQ(job.recognizer_batches(), 1);
  // Steps: a a blank a b space space c blank  ->  "aa b c" (repeats merged, blank splits)
  const std::vector<int> best = {1, 1, 0, 1, 2, 4, 4, 3, 0};
  Tensor rec(DataType::kFloat32, {1, static_cast<int64_t>(best.size()), 5});
  auto r = rec.values<float>();
  std::fill(r.begin(), r.end(), 0.0f);
  for (size_t t = 0; t < best.size(); ++t) r[t * 5 + best[t]] = 0.8f;
  ASSERT_TRUE(job.TakeRecognizer(0, rec).ok());
  const OcrPage out = job.Finish();
  ASSERT_EQ(out.lines.size(), 1u);
  EXPECT_EQ(out.lines[0].text, "aab c");
  EXPECT_FLOAT_EQ(out.lines[0].confidence, 0.8f);
}

// Three lines, each black at its left end (x 20..60) and white elsewhere; the detector's map marks the three
// lines (x 20..180) and the classifier's output classes the first two 180 degrees, the third upright. Which
// crops were turned shows in the recogniser's input: black on the left (upright) or on the right (turned).
std::vector<bool> TurnedLines(bool page_majority) {
  cv::Mat m(120, 200, CV_8UC3, cv::Scalar(255, 255, 255));
  Tensor det(DataType::kFloat32, {1, 1, 120, 200});
  auto p = det.values<float>();
  std::fill(p.begin(), p.end(), 0.0f);
  for (int top : {10, 50, 90}) {
    m(cv::Rect(20, top, 40, 20)).setTo(cv::Scalar(0, 0, 0));
    for (int y = top; y < top + 20; ++y) {
      for (int x = 20; x < 180; ++x) p[y * 200 + x] = 0.9f;
    }
  }
  Image page{m.cols, m.rows, 3, std::vector<uint8_t>(m.data, m.data + m.total() * 3)};
  const std::vector<std::string> dictionary = {"a"};
  OcrOptions options;
  options.cls_page_majority = page_majority;
  ocr::PageJob job(page, options, dictionary);
  EXPECT_TRUE(job.TakeDetector(det).ok());
  EXPECT_EQ(job.classifier_batches(), 1);
  Tensor cls(DataType::kFloat32, {3, 2});
  auto c = cls.values<float>();
  const float scores[6] = {0.05f, 0.95f, 0.05f, 0.95f, 0.97f, 0.03f};  // 180, 180, 0
  std::copy(scores, scores + 6, c.begin());
  EXPECT_TRUE(job.TakeClassifier(0, cls).ok());
  const Tensor rec = job.RecognizerInput(0);
  const Shape& s = rec.shape();
  EXPECT_EQ(s[0], 3);
  const float* v = rec.values<float>().data();
  std::vector<bool> turned;
  for (int64_t n = 0; n < s[0]; ++n) {
    const float* row = v + ((n * 3) * s[2] + 24) * s[3];  // channel 0, the middle row
    EXPECT_NE(row[30] < 0, row[160] < 0) << "line " << n << ": black at neither end or at both";
    turned.push_back(row[160] < 0);
  }
  return turned;
}

TEST(OcrClassifier, PageMajorityTurnsEveryLineOfAMostlyUpsideDownPage) {
  EXPECT_EQ(TurnedLines(true), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(TurnedLines(false), (std::vector<bool>{true, true, false}));  // PaddleOCR's rule: each on its own
}

Image TextPage(const std::string& text) {
  cv::Mat m(240, 640, CV_8UC3, cv::Scalar(255, 255, 255));
  cv::putText(m, text, cv::Point(30, 130), cv::FONT_HERSHEY_SIMPLEX, 1.6, cv::Scalar(0, 0, 0), 3, cv::LINE_AA);
  return Image{m.cols, m.rows, 3, std::vector<uint8_t>(m.data, m.data + m.total() * 3)};
}

Image BlankPage() { return Image{320, 200, 3, std::vector<uint8_t>(320 * 200 * 3, 255)}; }

struct Recorded {
  std::vector<RunRecord> runs;
  RunObserver observer = [this](const RunRecord& r) { runs.push_back(r); };
  int ends() const {
    int n = 0;
    for (const auto& r : runs) n += r.ends_operation;
    return n;
  }
};

TEST(OcrPipeline, RecognisesTextAsOneOperationReleasedAtItsLastRun) {
  auto runtime = Runtime::Create();
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  auto ocr = OcrPipeline::Load(**runtime, kPipeline);
  ASSERT_TRUE(ocr.ok()) << ocr.status().ToString();
  Recorded rec;
  OperationOptions options;
  options.observer = &rec.observer;
  auto pages = (*ocr)->Recognise({BlankPage(), TextPage("HELLO 2026")}, options);
  ASSERT_TRUE(pages.ok()) << pages.status().ToString();
  ASSERT_EQ(pages->size(), 2u);
  EXPECT_TRUE((*pages)[0].lines.empty());
  ASSERT_EQ((*pages)[1].lines.size(), 1u);
  EXPECT_EQ((*pages)[1].lines[0].text, "HELLO 2026");
  // det (blank), det, cls, rec: one release, at the very last run.
  ASSERT_EQ(rec.runs.size(), 4u);
  EXPECT_EQ(rec.ends(), 1);
  EXPECT_TRUE(rec.runs.back().ends_operation);
  auto arena = (*runtime)->ReadSharedArena();
  ASSERT_TRUE(arena.has_value());
  // What stays in use is the sessions' own (initializers); what the runs grew went back.
  EXPECT_LE(arena->reserved - arena->in_use, (arena->peak_in_use - arena->in_use) / 4) << "the arena was not given back";
}

TEST(OcrPipeline, ItsFoldersLevelLoadsTheThreeModelsUnlessTheCallerNamesOne) {
  // The bundled pipeline's config.json asks for "all" (PP-OCR's convolutions run faster in ORT's
  // NCHWc layout); the policy's default is "extended".
  auto runtime = Runtime::Create();
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  ASSERT_EQ((*runtime)->policy().graph_optimization, GraphOptimization::kExtended);
  auto files = ReadOcrFolder(kPipeline);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->graph_optimization, GraphOptimization::kAll);
  auto ocr = OcrPipeline::Load(**runtime, kPipeline);
  ASSERT_TRUE(ocr.ok()) << ocr.status().ToString();
  for (const auto& s : (*ocr)->sessions()) {
    EXPECT_EQ(s->load_record().graph_optimization, GraphOptimization::kAll) << s->name();
  }
  // The caller's level wins, and makes other sessions: the models at two levels are cached apart.
  auto extended = OcrPipeline::Load(**runtime, kPipeline, {}, {.graph_optimization = GraphOptimization::kExtended});
  ASSERT_TRUE(extended.ok()) << extended.status().ToString();
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*extended)->sessions()[i]->load_record().graph_optimization, GraphOptimization::kExtended);
    EXPECT_NE(&(*extended)->sessions()[i]->state(), &(*ocr)->sessions()[i]->state());
  }
  // The same level again is the same session.
  auto same = OcrPipeline::Load(**runtime, kPipeline);
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(&(*same)->sessions()[0]->state(), &(*ocr)->sessions()[0]->state());
  // Both levels read the same page alike.
  auto a = (*ocr)->Recognise({TextPage("HELLO 2026")});
  auto b = (*extended)->Recognise({TextPage("HELLO 2026")});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)[0].lines.size(), 1u);
  ASSERT_EQ((*b)[0].lines.size(), 1u);
  EXPECT_EQ((*a)[0].lines[0].text, (*b)[0].lines[0].text);
}

TEST(OcrPipeline, ALastPageWithoutTextStillGivesTheMemoryBack) {
  auto runtime = Runtime::Create();
  ASSERT_TRUE(runtime.ok());
  auto ocr = OcrPipeline::Load(**runtime, kPipeline);
  ASSERT_TRUE(ocr.ok()) << ocr.status().ToString();
  Recorded rec;
  OperationOptions options;
  options.observer = &rec.observer;
  auto pages = (*ocr)->Recognise({TextPage("ebb 36"), BlankPage()}, options);
  ASSERT_TRUE(pages.ok()) << pages.status().ToString();
  EXPECT_EQ((*pages)[0].lines.size(), 1u);
  EXPECT_TRUE((*pages)[1].lines.empty());
  // No run could know it was the last (a detector run may add runs): none released, Execute did.
  EXPECT_EQ(rec.ends(), 0);
  auto arena = (*runtime)->ReadSharedArena();
  ASSERT_TRUE(arena.has_value());
  EXPECT_LE(arena->reserved - arena->in_use, (arena->peak_in_use - arena->in_use) / 4) << "the arena was not given back";
  // The sessions stay loaded between calls: a second call loads nothing.
  const uint64_t loads = (*runtime)->load_count();
  ASSERT_TRUE((*ocr)->Recognise({BlankPage()}).ok());
  EXPECT_EQ((*runtime)->load_count(), loads);
}

TEST(OcrPipeline, InvalidInputsAreClearErrors) {
  auto runtime = Runtime::Create();
  ASSERT_TRUE(runtime.ok());
  EXPECT_EQ(OcrPipeline::Load(**runtime, "/nonexistent-ocr").status().code(), StatusCode::kNotFound);
  auto ocr = OcrPipeline::Load(**runtime, kPipeline);
  ASSERT_TRUE(ocr.ok());
  Image broken{10, 10, 3, {1, 2, 3}};
  auto r = (*ocr)->Recognise({BlankPage(), broken});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("page 1"), std::string::npos);
  EXPECT_TRUE((*ocr)->Recognise({}).ok());
}

}  // namespace
}  // namespace ebb
