// The one confinement check (ebb/confined_path.h) on the one primitive, port::RealPath: the
// port layer's realpath (GetFinalPathNameByHandleW on Windows, through an opened handle, so that
// junctions and the volume's own spelling are resolved as the file system sees them), which
// CheckedFile's opens are checked against too. std::filesystem::canonical would be a second
// resolution of the same path, spelled differently on Windows (its own UTF-16 conversion, no
// handle), so a root and a path resolved by the two could differ in form and compare wrongly.
#include "ebb/confined_path.h"

#include <filesystem>
#include <system_error>

#include "port.h"

namespace ebb {
namespace fs = std::filesystem;

namespace {

bool Inside(const fs::path& root, const fs::path& path) {
  auto r = root.begin(), p = path.begin();
  for (; r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *r != *p) return false;
  }
  return true;
}

}  // namespace

Result<std::string> RealPath(const std::string& path) { return port::RealPath(path); }

bool PathInside(const std::string& root, const std::string& path) {
  return Inside(port::PathFromUtf8(root), port::PathFromUtf8(path));
}

Result<std::string> ResolveUnder(const std::string& root, const std::string& path, const std::string& root_name) {
  const std::string where = root_name.empty() ? "'" + root + "'" : root_name;
  Result<std::string> real_root = RealPath(root);
  if (!real_root.ok()) return FailedPrecondition("is under " + where + ", which " + real_root.status().message());
  const fs::path resolved_root = port::PathFromUtf8(*real_root);
  const fs::path given = port::PathFromUtf8(path);
  const fs::path candidate = given.is_absolute() ? given : resolved_root / given;
  // What the text says, before anything is looked at.
  const fs::path named = candidate.lexically_normal();
  bool says_inside = Inside(resolved_root, named);
  if (!says_inside && given.is_absolute()) {
    std::error_code ec;
    const fs::path as_given = fs::absolute(port::PathFromUtf8(root), ec).lexically_normal();
    says_inside = !ec && Inside(as_given, named);
  }
  if (!says_inside) return InvalidArgument("leaves " + where);
  const std::string looked_for = port::Utf8FromPath(candidate);
  Result<std::string> real = RealPath(looked_for);
  if (!real.ok()) {
    Result<port::FileInfo> there = port::StatPath(looked_for, /*follow_links=*/true);
    if (!there.ok() && there.status().code() == StatusCode::kNotFound) {
      return NotFound("does not exist under " + where + " (looked for " + looked_for + ")");
    }
    return real.status();
  }
  if (!PathInside(*real_root, *real)) return InvalidArgument("resolves outside " + where + " (to " + *real + ")");
  return real;
}

Result<std::string> ResolveBelow(const std::string& root, const std::string& path) {
  Result<std::string> real = ResolveUnder(root, path);
  if (!real.ok()) return real;
  if (Result<std::string> real_root = RealPath(root); real_root.ok() && *real == *real_root) {
    return InvalidArgument("is the folder itself");
  }
  return real;
}

}  // namespace ebb
