// server/core/classification.h — the classification extension of the KServe
// v2 / Triton protocols.
//
// An output requested with the parameter `classification: K` comes back as a
// BYTES tensor of the top K classes instead of the raw scores. Per batch row
// (the first dimension of an output of rank >= 2; an output of rank 0 or 1 is
// one row), the elements are "value:index", or "value:index:label" when the
// model folder has labels (labels.txt, line i naming class i), sorted by value,
// highest first (ties: lower index first). Values are written as C++
// std::to_string does (Triton's format: "0.750000", "42"). The result has shape
// [rows, min(K, classes)] (rank >= 2) or [min(K, classes)].
//
// Thread safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "ebb/tensor.h"

namespace ebb::server {

// Errors: kInvalidArgument when K < 1 or the output is not numeric (BOOL, BYTES).
Result<Tensor> Classify(const Tensor& scores, int64_t k, const std::vector<std::string>& labels,
                        const std::string& output_name);

}  // namespace ebb::server
