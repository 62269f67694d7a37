// fuzz/http_framing_fuzzer.cc — libFuzzer target for the transport's HTTP/1.1 framing
// (server/http/http_framing.h): arbitrary bytes arrive as a connection would deliver them, cut
// into reads of a size the first byte chooses, possibly several pipelined requests. Checked: no
// crash (ASan/UBSan), every request either comes out whole and within the limits or fails with
// one of the framing statuses and a message, the body budget is never overdrawn, and the
// framer ends in a final state at end of input. Pipelined requests' framers share one FramerRoom.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "http/http_framing.h"

namespace {

using ebb::server::FramingLimits;
using ebb::server::RequestFramer;

void Check(bool ok) {
  if (!ok) std::abort();
}

bool IsFramingStatus(int status) {
  switch (status) {
    case 400: case 413: case 414: case 415: case 417: case 431: case 501: case 503: case 505: return true;
    default: return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = data[0] == 0 ? size : data[0];  // bytes per read; 0 = everything at once
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  // Small limits so that the fuzzer reaches them; a budget below the body limit to reach 503.
  const FramingLimits limits{.max_header_bytes = 2048, .max_uri_bytes = 512, .max_body_bytes = 64u << 10};
  const size_t budget = 48u << 10;
  size_t in_flight = 0;
  auto reserve = [&](size_t n) {
    if (in_flight + n > budget) return false;
    in_flight += n;
    return true;
  };
  // The room a connection's framers pass on (strings and a small body's buffer), as the transport does.
  ebb::server::FramerRoom room;
  auto framer = std::make_unique<RequestFramer>(limits, reserve, &room);
  std::string pending;  // received, not yet used
  size_t offset = 0;
  for (;;) {
    const size_t n = std::min(step, input.size() - offset);
    pending.append(input.substr(offset, n));
    offset += n;
    for (;;) {
      const size_t used = framer->Feed(pending);
      Check(used <= pending.size());
      pending.erase(0, used);
      const RequestFramer::State state = framer->state();
      if (state == RequestFramer::State::kFailed) {
        Check(IsFramingStatus(framer->error().status) && !framer->error().message.empty());
        Check(framer->reserved_bytes() <= budget);
        return 0;  // the transport closes the connection after a framing error
      }
      if (state == RequestFramer::State::kComplete) {
        Check(!framer->method().empty() && !framer->target().empty());
        Check(framer->version() == 10 || framer->version() == 11);
        Check(framer->body().size() <= limits.max_body_bytes);
        Check(framer->reserved_bytes() == framer->body().size() && in_flight == framer->body().size());
        in_flight = 0;  // the transport gives the budget back once the request is answered
        framer.reset();  // gives its room back before the next one takes it
        framer = std::make_unique<RequestFramer>(limits, reserve, &room);
        continue;
      }
      if (used == 0 || pending.empty()) break;  // needs more bytes
    }
    if (offset == input.size()) break;
  }
  framer->EndOfInput();
  const RequestFramer::State state = framer->state();
  Check(state == RequestFramer::State::kFailed || (state == RequestFramer::State::kHeader && !framer->started()));
  if (state == RequestFramer::State::kFailed) Check(framer->error().status == 400);
  return 0;
}
