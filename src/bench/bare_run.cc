#include "bare_run.h"

#include <memory>

#include "ort_api.h"

namespace ebb::detail {

std::function<bool()> MakeBareOrtRun(Session& session, const std::vector<NamedTensor>& inputs) {
  SessionState& s = session.state();
  auto prepared = std::make_shared<PreparedInputs>(s.wrappers);
  if (!PrepareInputs(s, session.name(), inputs, prepared.get()).ok()) return nullptr;
  return [&s, prepared] {
    std::vector<OrtValue*> outputs(s.output_names.size(), nullptr);  // ORT allocates them
    try {
      InvokeOrtRun({s.session.get(), prepared->names.data(), prepared->values.data(), prepared->values.size(),
                    s.output_names.data(), outputs.data(), outputs.size(), ""});
    } catch (const Ort::Exception&) {
      return false;
    }
    for (OrtValue* value : outputs) Ort::Value released(value);
    return true;
  };
}
}  // namespace ebb::detail
