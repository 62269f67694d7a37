// `ebb bench json`: what decoding a JSON inference request costs, beside a plain copy of the same
// bytes, the same tensor in binary form, and the tree-building decoder ebb used before (kept here,
// only here, as the baseline).
//
// The request: one FP32 input [1,3,256,256] (196,608 numbers) written as a Python client writes
// doubles, ~4 MB of JSON. Throughput is body bytes over the median time of a decode (the decoders
// take turns, so that a shared machine's load falls on all of them alike). Peak memory
// is the growth of the process's RSS high-water mark (VmHWM, reset through /proc/self/clear_refs
// after malloc_trim) while one decode runs: pages really touched, the resulting tensor included.

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "bench.h"
#include "bench_goals.h"
#include "http/protocol.h"
#include "port.h"

namespace ebb::cli {
namespace {

using nlohmann::json;

std::string JsonRequest(int64_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> value(-1.0, 1.0);
  std::string body = R"({"inputs":[{"name":"x","shape":[1,3,256,256],"datatype":"FP32","data":[)";
  char number[32];
  for (int64_t i = 0; i < count; ++i) {
    if (i > 0) body += ", ";
    body.append(number, std::to_chars(number, number + sizeof number, value(rng)).ptr);
  }
  return body + "]}]}";
}

// The same tensor as the binary extension sends it; *header_length is the JSON part's length.
std::string BinaryRequest(const Tensor& tensor, size_t* header_length) {
  const std::string header = R"({"inputs":[{"name":"x","shape":[1,3,256,256],"datatype":"FP32",)"
                             R"("parameters":{"binary_data_size":)" + std::to_string(tensor.byte_size()) + "}}]}";
  *header_length = header.size();
  return header + std::string(reinterpret_cast<const char*>(tensor.data()), tensor.byte_size());
}

// The decoder before the SAX reader: the whole body as an nlohmann tree, then the "data" leaves
// (nested or flat) converted to float. Returns false for anything but one FP32 input.
void FillOld(const json& node, std::vector<float>* out) {
  for (const json& child : node) {
    if (child.is_array()) {
      FillOld(child, out);
    } else {
      out->push_back(static_cast<float>(child.get<double>()));
    }
  }
}
bool DecodeOld(const std::string& body, std::vector<float>* out) {
  const json root = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return false;
  out->clear();
  FillOld(root["inputs"][0]["data"], out);
  return true;
}

// Growth of the RSS high-water mark while `f` runs.
template <typename F>
int64_t PeakGrowth(F f) {
  port::TrimHeap();
  port::ResetPeakResident();
  const int64_t before = ReadRssBytes();
  f();
  return ReadPeakRssBytes() - before;
}

json Figures(double ms, size_t bytes) {
  return {{"ms", ms}, {"mb_per_s", static_cast<double>(bytes) / 1e6 / (ms / 1e3)}};
}

}  // namespace

int BenchJson(const BenchOptions& options) {
  const int64_t count = 3 * 256 * 256;
  const int iterations = options.iterations ? options.iterations : 30;
  const std::string body = JsonRequest(count, 7);
  const double size = static_cast<double>(body.size());

  auto decoded = server::ParseInferRequest(body, std::nullopt);
  if (!decoded.ok()) return Fail(decoded.status());
  const Tensor& tensor = decoded->request.inputs[0].tensor;
  std::vector<float> old_values;
  const bool same_values = DecodeOld(body, &old_values) && old_values.size() == static_cast<size_t>(count) &&
                           std::memcmp(old_values.data(), tensor.data(), tensor.byte_size()) == 0;
  if (!same_values) {
    std::fprintf(stderr, "ebb: error: the old and the new decoder disagree\n");
    return 1;
  }
  size_t header_length = 0;
  const std::string binary = BinaryRequest(tensor, &header_length);

  // Interleaved, so that the old and the new decoder see the same load on a shared machine: each
  // round times every decoder once (the old one every fifth round: it is slow).
  std::vector<double> copy_times, json_times, binary_times, old_times;
  const auto time = [](std::vector<double>* times, const auto& f) {
    const double start = NowMs();
    f();
    times->push_back(NowMs() - start);
  };
  for (int round = 0; round < iterations; ++round) {
    time(&copy_times, [&] {
      std::string copy = body;
      if (copy.empty()) std::abort();
    });
    time(&json_times, [&] { (void)server::ParseInferRequest(body, std::nullopt); });
    time(&binary_times, [&] { (void)server::ParseInferRequest(binary, header_length); });
    if (round % 5 == 0) time(&old_times, [&] { (void)DecodeOld(body, &old_values); });
  }
  const double copy_ms = Median(copy_times);
  const double json_ms = Median(json_times);
  const double binary_ms = Median(binary_times);
  const double old_ms = Median(old_times);

  const int64_t copy_peak = PeakGrowth([&] {
    std::string copy = body;
    if (copy.empty()) std::abort();
  });
  const int64_t json_peak = PeakGrowth([&] { (void)server::ParseInferRequest(body, std::nullopt); });
  const int64_t old_peak = PeakGrowth([&] {
    std::vector<float> values;
    (void)DecodeOld(body, &values);
  });

  const double speedup = old_ms / json_ms;
  const double json_peak_per_byte = static_cast<double>(json_peak) / size;
  json j = {{"elements", count},
            {"body_bytes", body.size()},
            {"binary_body_bytes", binary.size()},
            {"rounds", iterations},
            {"copy", Figures(copy_ms, body.size())},
            {"json_decode", Figures(json_ms, body.size())},
            {"json_decode_old_tree", Figures(old_ms, body.size())},
            {"binary_decode", Figures(binary_ms, binary.size())},
            {"json_over_binary_ms", json_ms - binary_ms},
            {"speedup_over_old", speedup},
            {"peak_memory",
             {{"measure", "growth of VmHWM (RSS high-water mark) during one decode, after malloc_trim and clear_refs"},
              {"copy_bytes", copy_peak},
              {"json_decode_bytes", json_peak},
              {"json_decode_old_tree_bytes", old_peak},
              {"json_decode_per_body_byte", json_peak_per_byte},
              {"json_decode_old_tree_per_body_byte", static_cast<double>(old_peak) / size}}}};
  Goals goals;
  goals.AtLeast("throughput_at_least_10x_old", speedup, 10, "old decoder's median time / the new one's");
  goals.AtMost("peak_memory_at_most_3x_body", json_peak_per_byte, 3, "VmHWM growth of one decode / body bytes");
  goals.Holds("same_values_as_old", same_values);
  return goals.Finish(j);
}

}  // namespace ebb::cli
