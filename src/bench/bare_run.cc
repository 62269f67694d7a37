#include "bare_run.h"

#include <memory>

#include "ort_api.h"

namespace ebb::detail {

std::function<bool()> MakeBareOrtRun(Session& session, const std::vector<NamedTensor>& inputs) {
  SessionState& s = session.state();
  auto prepared = std::make_shared<PreparedInputs>();
  if (!PrepareInputs(s, session.name(), inputs, prepared.get()).ok()) return nullptr;
  return [&s, prepared] {
    std::vector<Ort::Value> outputs(s.output_names.size());
    try {
      InvokeOrtRun({s.session.get(), prepared->names.data(), prepared->values.data(), prepared->values.size(),
                    s.output_names.data(), outputs.data(), outputs.size(), ""});
    } catch (const Ort::Exception&) {
      return false;
    }
    return true;
  };
}
}  // namespace ebb::detail
