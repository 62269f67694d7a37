// `ebb bench ocr`: the OCR pipeline's whole job (ebb/ocr.h) on pages of
// varied sizes, through (a) ebb, (b) plain ORT as RapidOCR makes it with ORT's
// default CPU arena and (c) the same with the arena off (RapidOCR's default),
// each in its own process (this binary re-executed with --worker), the same
// pre- and post-processing code in all three (src/ocr/ocr_steps.h; the
// baselines are src/ocr/bare_ocr.h). Two ways:
//   burst: every page in one call (for ebb one operation);
//   page:  each page its own call, as a tool that OCRs what it is given one
//          page at a time.
// The pages are rendered first by tests/ocr/render_pages.py (Debian's
// DejaVu fonts through Pillow, /usr/bin/python3), 600x800 up to 2480x3508,
// shuffled. Prints JSON with the figures and the goals
// (bench_goals.h); docs/ocr.md explains them.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "bench.h"
#include "bench_goals.h"
#include "ebb/image.h"
#include "ebb/memory_stats.h"
#include "ebb/ocr.h"
#include "bare_ocr.h"
#include "bench_ocr_switch.h"
#include "port.h"
#include "spawn_self.h"

namespace ebb::cli {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;
constexpr double kMiB = 1024.0 * 1024.0;

struct Page {
  std::string path;
  int width = 0, height = 0;
};

Result<std::vector<Page>> ReadPages(const std::string& dir) {
  std::ifstream in(fs::path(dir) / "pages.json");
  if (!in) return NotFound("no pages.json in " + dir);
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return InvalidArgument("pages.json is not JSON");
  std::vector<Page> pages;
  for (const json& p : j) pages.push_back({(fs::path(dir) / p["image"].get<std::string>()).string(), p["width"], p["height"]});
  return pages;
}

json Texts(const std::vector<OcrPage>& pages) {
  json t = json::array();
  for (const OcrPage& p : pages) {
    std::string s;
    for (const OcrLine& l : p.lines) s += l.text + "\n";
    t.push_back(s);
  }
  return t;
}

// The time to map and zero `bytes` of fresh pages and give them back: the
// physical floor of growing an arena of that size again.
double RefaultMs(int64_t bytes) {
  if (bytes <= 0) return 0;
  const double t0 = NowMs();
  void* p = port::AllocatePages(static_cast<size_t>(bytes));  // populated: mapped and zeroed by the kernel
  if (!p) return -1;
  port::FreePages(p, static_cast<size_t>(bytes));
  return NowMs() - t0;
}

// One configuration, one way, in this (child) process.
int Worker(const OcrBenchOptions& o) {
  auto pages = ReadPages(o.pages_dir);
  if (!pages.ok()) return Fail(pages.status());
  auto files = ReadOcrFolder(OcrPipelineFolder(o.pipeline, o.common));
  if (!files.ok()) return Fail(files.status());

  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<OcrPipeline> pipeline;
  std::unique_ptr<detail::BareOcr> bare;
  const double l0 = NowMs();
  if (o.worker == "ebb") {
    runtime = MakeRuntime(o.common);
    if (!runtime) return 1;
    auto p = OcrPipeline::Load(*runtime, *files);
    if (!p.ok()) return Fail(p.status());
    pipeline = std::move(p).value();
  } else {
    auto b = detail::BareOcr::Load(*files, o.worker == "ort_arena");
    if (!b.ok()) return Fail(b.status());
    bare = std::move(b).value();
  }
  json r = {{"load_ms", NowMs() - l0}};
  const int64_t after_load = ReadRssBytes();
  r["rss_after_load"] = after_load;
  port::ResetPeakResident();

  auto recognise = [&](const std::vector<Image>& images) -> Result<std::vector<OcrPage>> {
    if (pipeline) return pipeline->Recognise(images);
    std::vector<OcrPage> out;
    for (const Image& image : images) {
      auto page = bare->Recognise(image);
      if (!page.ok()) return page.status();
      out.push_back(std::move(page).value());
    }
    return out;
  };

  std::vector<OcrPage> results;
  if (o.worker_mode == "burst") {
    std::vector<Image> images;
    for (const Page& p : *pages) {
      auto image = ReadImage(p.path);
      if (!image.ok()) return Fail(image.status());
      images.push_back(std::move(image).value());
    }
    const double t0 = NowMs();
    auto out = recognise(images);
    const double ms = NowMs() - t0;
    if (!out.ok()) return Fail(out.status());
    results = std::move(out).value();
    r["seconds"] = ms / 1000;
    r["pages_per_second"] = static_cast<double>(pages->size()) / (ms / 1000);
    images.clear();
    r["rss_after"] = ReadRssBytes();
  } else {
    std::vector<double> ms;
    std::vector<int64_t> rss, faults;
    for (const Page& p : *pages) {
      std::vector<Image> one;
      auto image = ReadImage(p.path);
      if (!image.ok()) return Fail(image.status());
      one.push_back(std::move(image).value());
      const int64_t f0 = port::MinorPageFaults();
      const double t0 = NowMs();
      auto out = recognise(one);
      ms.push_back(NowMs() - t0);
      faults.push_back(port::MinorPageFaults() - f0);
      if (!out.ok()) return Fail(out.status());
      results.push_back(std::move((*out)[0]));
      one.clear();
      rss.push_back(ReadRssBytes());
    }
    r["page_ms"] = ms;
    r["rss_after_page"] = rss;
    r["minor_faults_per_page"] = faults;
    double total = 0;
    for (double v : ms) total += v;
    r["ms_per_page"] = total / static_cast<double>(ms.size());
  }
  r["peak_rss"] = port::PeakResidentBytes();
  if (runtime) {
    if (auto arena = runtime->ReadSharedArena()) {
      r["arena_peak_in_use"] = arena->peak_in_use;
      r["refault_ms_of_arena_peak"] = RefaultMs(arena->peak_in_use);
    }
  }
  r["texts"] = Texts(results);
  PrintJson(r);
  return 0;
}

Result<json> RunWorker(const OcrBenchOptions& o, const std::string& kind, const std::string& mode,
                       const std::string& dir) {
  std::vector<std::string> args = {"ebb", "bench", "ocr", "--worker", kind, "--worker-mode", mode, "--pages-dir", dir,
                                   "--pipeline", o.pipeline, "--models", o.common.models_dir};
  if (!o.common.policy_file.empty()) args.insert(args.end(), {"--policy", o.common.policy_file});
  auto text = RunSelf(std::move(args));
  if (!text.ok()) return Internal(kind + " worker (" + mode + ") failed: " + text.status().message());
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return Internal(kind + " worker (" + mode + ") printed no JSON");
  return j;
}

bool Within(int64_t value, int64_t base) {
  return static_cast<double>(value - base) <= std::max(0.10 * static_cast<double>(base), 16 * kMiB);
}

}  // namespace

int BenchOcr(const OcrBenchOptions& o) {
  if (!o.worker.empty()) return Worker(o);
  if (o.pages < 1) return Fail(InvalidArgument("--pages must be at least 1"));
  // The pages, rendered with their text by the test's script.
  const fs::path dir = fs::temp_directory_path() / ("ebb-bench-ocr-" + std::to_string(port::ProcessId()));
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{dir};
  const std::string render = "/usr/bin/python3 '" + o.render_script + "' '" + dir.string() + "' bench " +
                             std::to_string(o.pages) + " > /dev/null";
  if (std::system(render.c_str()) != 0) {
    return Fail(Unavailable("rendering the pages failed (" + o.render_script +
                            ": needs /usr/bin/python3 with python3-pil and fonts-dejavu-core)"));
  }
  const std::vector<std::string> kinds = {"ebb", "ort_arena", "ort_noarena"};
  json result = {{"benchmark", "ocr"}, {"pages", o.pages}};
  Goals goals;
  json runs;
  for (const std::string mode : {"burst", "page"}) {
    for (const std::string& kind : kinds) {  // interleaved: the three one after another, per way
      auto r = RunWorker(o, kind, mode, dir.string());
      if (!r.ok()) return Fail(r.status());
      runs[mode][kind] = std::move(r).value();
    }
  }
  const json& be = runs["burst"]["ebb"];
  const json& bb = runs["burst"]["ort_arena"];
  const json& bc = runs["burst"]["ort_noarena"];
  const json& pe = runs["page"]["ebb"];
  const json& pb = runs["page"]["ort_arena"];
  const json& pc = runs["page"]["ort_noarena"];
  auto mib = [](const json& v) { return std::round(v.get<double>() / kMiB * 10) / 10; };
  json table = json::object();
  for (const std::string& kind : kinds) {
    const json& b = runs["burst"][kind];
    const json& p = runs["page"][kind];
    std::vector<double> rss_mib;
    for (const json& v : p["rss_after_page"]) rss_mib.push_back(mib(v));
    std::vector<int64_t> faults = p["minor_faults_per_page"];
    int64_t fault_sum = 0;
    for (int64_t f : faults) fault_sum += f;
    std::vector<double> page_ms = p["page_ms"];
    table[kind] = {{"burst_pages_per_second", b["pages_per_second"]},
                   {"burst_peak_rss_mib", mib(b["peak_rss"])},
                   {"burst_rss_after_load_mib", mib(b["rss_after_load"])},
                   {"burst_rss_after_mib", mib(b["rss_after"])},
                   {"page_ms_per_page", p["ms_per_page"]},
                   {"page_peak_rss_mib", mib(p["peak_rss"])},
                   {"page_rss_after_load_mib", mib(p["rss_after_load"])},
                   {"page_rss_after_each_mib", rss_mib},
                   {"page_ms_each", page_ms},
                   {"page_minor_faults_each", faults},
                   {"page_minor_faults_mean", static_cast<double>(fault_sum) / static_cast<double>(faults.size())}};
  }
  result["figures"] = table;
  // The pages in the order all three ran them (the x axis of the RSS-per-page series).
  auto pages = ReadPages(dir.string());
  if (!pages.ok()) return Fail(pages.status());
  json sizes = json::array();
  for (const Page& p : *pages) sizes.push_back({p.width, p.height});
  result["page_sizes"] = sizes;
  if (pe.contains("arena_peak_in_use")) {
    // What ebb faults in per page beyond (b), which keeps its arena: the bytes given back and mapped again.
    const double extra_faults = table["ebb"]["page_minor_faults_mean"].get<double>() -
                                table["ort_arena"]["page_minor_faults_mean"].get<double>();
    result["page_floor"] = {{"arena_peak_mib", mib(pe["arena_peak_in_use"])},
                            {"refault_ms", pe["refault_ms_of_arena_peak"]},
                            {"extra_minor_faults_per_page_vs_ort_arena", extra_faults},
                            {"extra_mib_faulted_per_page_vs_ort_arena",
                             extra_faults * static_cast<double>(port::PageSize()) / kMiB},
                            {"note", "refault_ms: the time to map and zero ebb's arena peak afresh in 4 KiB pages on "
                                     "this machine (its regions mostly get huge pages, which cost less); extra_*: "
                                     "the pages ebb faults in again per page beyond (b), which keeps its arena"}};
  }
  const double pps_e = be["pages_per_second"], pps_b = bb["pages_per_second"], pps_c = bc["pages_per_second"];
  goals.AtLeast("burst_pages_per_second_vs_ort_arena", pps_e / pps_b, 0.97, "x");
  goals.AtLeast("burst_pages_per_second_vs_ort_no_arena", pps_e / pps_c, 1.0, "x");
  goals.AtMost("burst_peak_rss_vs_ort_arena", be["peak_rss"].get<double>() / bb["peak_rss"].get<double>(), 1.0, "x");
  goals.Holds("burst_rss_after_call_within_10pct_or_16mib_of_after_load",
              Within(be["rss_after"].get<int64_t>(), be["rss_after_load"].get<int64_t>()));
  goals.Holds("text_identical_in_all_three",
              be["texts"] == bb["texts"] && be["texts"] == bc["texts"] && pe["texts"] == be["texts"] &&
                  pb["texts"] == be["texts"] && pc["texts"] == be["texts"]);
  bool every_page = true;
  for (const json& v : pe["rss_after_page"]) every_page = every_page && Within(v.get<int64_t>(), pe["rss_after_load"].get<int64_t>());
  goals.Holds("page_rss_after_every_page_within_10pct_or_16mib_of_after_load", every_page);
  goals.AtMost("page_ms_per_page_vs_ort_arena", pe["ms_per_page"].get<double>() / pb["ms_per_page"].get<double>(),
               1.15, "x");
  // Switching: the smallest page, whose text the burst's ebb run read.
  size_t smallest = 0;
  for (size_t i = 1; i < pages->size(); ++i) {
    if ((*pages)[i].width * (*pages)[i].height < (*pages)[smallest].width * (*pages)[smallest].height) smallest = i;
  }
  auto switching = MeasureOcrSwitching(o, OcrPipelineFolder(o.pipeline, o.common), (*pages)[smallest].path,
                                       be["texts"][smallest], dir);
  if (switching.ok()) {
    result["switching"] = *switching;
    goals.Holds("switching_every_request_succeeds", (*switching)["failures"] == 0,
                "OCR and conv_100mb alternating, 4 clients, a budget that holds one: no failure, no false "
                "out-of-memory");
  } else {
    result["switching"] = {{"error", switching.status().ToString()}};
    goals.Holds("switching_every_request_succeeds", std::nullopt, switching.status().message());
  }
  return goals.Finish(result);
}

}  // namespace ebb::cli
