// `ebb bench ocr`'s switching part (bench_ocr_switch.cc): the OCR pipeline and
// the generated conv_100mb alternating over HTTP, 4 clients at once, on
// `ebb serve` under a budget that holds one of them.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "bench.h"

namespace ebb::cli {

// Serves `pipeline` (an OCR pipeline folder) and conv_100mb from a repository
// of links made under `dir`, and sends them requests in turn: the page
// `page_png` to the pipeline (its text compared with `page_text`) and an input
// of zeros to conv_100mb. Returns the requests, failures (out-of-memory ones
// counted apart), evictions and loads, and the time taken. Errors: no
// conv_100mb, the page unreadable, the server not starting.
Result<nlohmann::json> MeasureOcrSwitching(const OcrBenchOptions& options, const std::string& pipeline,
                                           const std::string& page_png, const std::string& page_text,
                                           const std::filesystem::path& dir);

}  // namespace ebb::cli
