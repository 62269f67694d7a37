// ebb/ocr.h — text recognition on pages: PP-OCR's detector, angle classifier
// and recogniser as one ebb operation per call.
//
// The pipeline takes the steps PaddleOCR and RapidOCR take (docs/ocr.md):
//   1. detection: the page, as BGR, resized so that both sides are multiples
//      of 32 with the longer side limited as RapidOCR limits it: to
//      limit_side_len (960) for a page under that, 1500 under 1500 px, else
//      max_side_len (2000); never upscaled; normalised with ImageNet's mean
//      and deviation;
//      DB post-processing: the probability map binarised at
//      binary_threshold (0.3) and dilated by a 2x2 kernel (use_dilation),
//      each connected region's minimum-area rectangle, kept when its mean
//      probability is at least box_threshold (0.5), grown by unclip_ratio
//      (1.6, polygon offsetting by area * ratio / perimeter), dropped when
//      its shorter side is under min_box_side; boxes scaled back to the
//      page's pixels. These three defaults are RapidOCR's, not PaddleOCR's
//      (no dilation, 0.6, 1.5): on English they keep the spaces between
//      words (docs/ocr.md has the error rates both ways);
//   2. each box cut out and rectified by a perspective transform, turned
//      upright (90° anticlockwise) when at least 1.5 times taller than wide;
//   3. the angle classifier on batches of cls_batch (6) crops at [3,48,192]
//      (normalised to [-1,1], padded right); a crop classed "180" with a
//      score above cls_threshold (0.9) is turned by 180°; with
//      cls_page_majority (default) the page decides: when such crops are at
//      least half of the page's, every crop of the page is turned, else
//      none (off: each line on its own, as PaddleOCR);
//   4. the recogniser on batches of rec_batch (6) crops sorted by aspect
//      ratio, at height 48 and the batch's widest ratio (at least 320/48);
//      CTC greedy decoding with the dictionary (index 0 the blank, the
//      dictionary's lines from 1, a space last); a line's confidence is the
//      mean probability of its kept characters; lines under drop_score (0.5)
//      or empty are dropped;
//   5. lines in reading order: top to bottom, then left to right for lines
//      whose tops are within 10 pixels.
//
// ONE OPERATION PER CALL: every run of Recognise() — each page's detection,
// every classifier and recogniser batch, every page of the call — is one ebb
// operation (ebb/operation.h), whose memory is given back once, after its last
// run. The three sessions stay loaded (and cached by the Runtime) between
// calls for as long as the OcrPipeline lives.
//
// A pipeline folder holds config.json {"kind": "ocr", "detector": DIR,
// "classifier": DIR, "recognizer": DIR, "dictionary": FILE}, the paths
// relative to the folder, each DIR a model folder with model.onnx.
//
// Availability: built where OpenCV's imgproc and Clipper are (Linux); in the
// Windows build every function here fails with kUnavailable ("OCR is not
// built on Windows", docs/dependencies.md).
//
// Thread safety: Recognise() may be called concurrently (each call is its own
// operation). Ownership: results belong to the caller.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "ebb/image.h"
#include "ebb/operation.h"
#include "ebb/runtime.h"
#include "ebb/status.h"

namespace ebb {

struct OcrOptions {
  int limit_side_len = 960;   // the detector's input: longer side at most this for pages under it,
  int max_side_len = 2000;    // 1500 for pages under 1500 px, else at most this (RapidOCR's steps)
  float binary_threshold = 0.3f;
  // DB post-processing as RapidOCR's defaults have it; PaddleOCR's are
  // use_dilation = false, box_threshold = 0.6, unclip_ratio = 1.5, which
  // cut lines' boxes tight enough that the recogniser drops most spaces
  // between English words (docs/ocr.md: error rates both ways).
  bool use_dilation = true;   // dilate the binary map by a 2x2 kernel before finding regions
  float box_threshold = 0.5f;
  float unclip_ratio = 1.6f;
  int max_candidates = 1000;  // regions looked at per page
  int min_box_side = 3;       // boxes with a shorter side under this are dropped
  bool use_classifier = true;
  float cls_threshold = 0.9f;
  // The page decides: when at least half of its lines are classed 180°
  // (above cls_threshold), every line is turned, else none (a page is upside
  // down as a whole far more often than one line is, and the classifier,
  // which sees a long line squeezed into 192 px, classes about one upright
  // line in 15 as 180° on rendered pages, and misses some turned ones).
  // false: PaddleOCR's rule, each line on its own.
  bool cls_page_majority = true;
  int cls_batch = 6;
  int rec_batch = 6;
  float drop_score = 0.5f;    // lines less confident than this are dropped
};

// One recognised line: its text (UTF-8), confidence in [0,1], and its box's
// four corners in the page's pixels (x, y), clockwise from the top left.
struct OcrLine {
  std::string text;
  float confidence = 0;
  std::array<std::array<float, 2>, 4> box{};
};

// A page's lines in reading order (empty when it has no text).
struct OcrPage {
  std::vector<OcrLine> lines;
};

// The files of a pipeline folder (absolute or relative to the working folder).
struct OcrModelFiles {
  std::string detector, classifier, recognizer, dictionary;
  // The level the three models are loaded at (config.json's "graph_optimization"),
  // unless the caller's LoadOptions names one; unset = the policy's.
  std::optional<GraphOptimization> graph_optimization;
};

// Reads a pipeline folder's config.json (ebb/model_config.h's rules). Errors:
// kNotFound (no config.json), kInvalidArgument (not JSON, kind not "ocr", a
// part missing or not a string, an unknown key).
Result<OcrModelFiles> ReadOcrFolder(const std::string& folder);

// Whether `folder` holds a config.json whose kind is "ocr".
bool IsOcrFolder(const std::string& folder);

class OcrPipeline {
 public:
  // Loads the three models through `runtime` (its cache) and the dictionary.
  // REQUIRES: runtime outlives the pipeline.
  // Errors: those of ReadOcrFolder and Runtime::Load; kInvalidArgument for a
  // dictionary whose size does not match the recogniser's classes.
  static Result<std::unique_ptr<OcrPipeline>> Load(Runtime& runtime, const std::string& folder,
                                                   const OcrOptions& options = {}, const LoadOptions& load = {});
  static Result<std::unique_ptr<OcrPipeline>> Load(Runtime& runtime, const OcrModelFiles& files,
                                                   const OcrOptions& options = {}, const LoadOptions& load = {});
  // From sessions loaded already (the server's pool holds the detector).
  // Errors: the dictionary's (kNotFound, kInvalidArgument), a session without
  // input or output, a dictionary that does not match the recogniser.
  static Result<std::unique_ptr<OcrPipeline>> Create(Runtime& runtime, std::shared_ptr<Session> detector,
                                                     std::shared_ptr<Session> classifier,
                                                     std::shared_ptr<Session> recognizer,
                                                     const std::string& dictionary, const OcrOptions& options = {});
  ~OcrPipeline();

  // The text of every page, one OcrPage per image, in one operation.
  // Errors: kInvalidArgument for an invalid image; a run's error (the
  // operation's memory is given back then too); kCancelled by options.stop.
  Result<std::vector<OcrPage>> Recognise(const std::vector<Image>& pages, const OperationOptions& options = {});

  const OcrOptions& options() const;
  // The three sessions (detector, classifier, recogniser).
  std::vector<std::shared_ptr<Session>> sessions() const;

 private:
  struct Impl;
  explicit OcrPipeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The pages as JSON: [{"image": names[i], "lines": [{"text", "confidence",
// "box": [[x,y] x4]}]}]; `names` may be empty (no "image" field then).
std::string OcrPagesToJson(const std::vector<OcrPage>& pages, const std::vector<std::string>& names = {});

}  // namespace ebb
