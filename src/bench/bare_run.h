// Internal, for `ebb bench overhead` only: a bare ORT Run on a Session's own
// Ort::Session with ORT-allocated outputs and no shrink configuration — the
// baseline the run boundary is measured against. Free of ONNX Runtime's
// headers (bench/ is linked by cli/ and tests/ only, never into libebb).
#pragma once

#include <functional>
#include <vector>

#include "ebb/session.h"

namespace ebb::detail {

// The inputs are wrapped once, here; the returned call only runs (false on
// failure; nullptr for bad inputs).
// REQUIRES: `session` and `inputs` outlive the returned function.
std::function<bool()> MakeBareOrtRun(Session& session, const std::vector<NamedTensor>& inputs);

}  // namespace ebb::detail
