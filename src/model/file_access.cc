#include "file_access.h"

#include "ebb/confined_path.h"

#include <cstdio>
#include <filesystem>

#include "port.h"

namespace ebb::detail {
namespace {

namespace fs = std::filesystem;

const char* KindOf(port::FileKind kind) {
  switch (kind) {
    case port::FileKind::kFolder: return "a folder";
    case port::FileKind::kFifo: return "a FIFO";
    case port::FileKind::kCharDevice: return "a character device";
    case port::FileKind::kBlockDevice: return "a block device";
    case port::FileKind::kSocket: return "a socket";
    default: return "not a regular file";
  }
}

std::string Octal(uint32_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

Status OverCap(const FileRules& rules, const std::string& path, const std::string& size) {
  return InvalidArgument("'" + path + "' is " + size + ", larger than the limit of " + CapText(rules.max_bytes) +
                         " for " + rules.what + ": refused");
}

}  // namespace

std::string CapText(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " bytes";
}

FileCopy::~FileCopy() {
  if (mapped_ > 0) port::FreePages(data_, mapped_);
}

Result<CheckedFile> CheckedFile::Open(const std::string& path, const FileRules& rules) {
  const std::string& what = rules.what;
  Result<port::FileInfo> there = port::StatPath(path, /*follow_links=*/false);
  if (!there.ok()) {
    if (there.status().code() == StatusCode::kNotFound) return NotFound(what + " '" + path + "' does not exist");
    return Internal("cannot look at " + what + " '" + path + "': " + there.status().message());
  }
  std::string target = path;
  std::string root;
  if (!rules.root.empty()) {
    Result<std::string> real_root = RealPath(rules.root);
    if (!real_root.ok()) return InvalidArgument("the root '" + rules.root + "' " + real_root.status().message());
    root = *real_root;
    Result<std::string> real = RealPath(path);
    if (!real.ok()) return InvalidArgument(what + " '" + path + "' " + real.status().message());
    if (!PathInside(root, *real)) {
      return InvalidArgument(what + " '" + path + "' resolves outside " + root + ": refused");
    }
    target = *real;
  } else if (rules.follow_links && !rules.own_private) {
    Result<std::string> real = port::RealPath(path);
    if (!real.ok()) return InvalidArgument(what + " '" + path + "' " + real.status().message());
    target = *real;
  }
  Result<port::ReadOnlyFile> opened = port::ReadOnlyFile::Open(target, /*no_follow=*/true);
  if (!opened.ok()) {
    const Status& why = opened.status();
    if (why.code() == StatusCode::kNotFound) return NotFound(what + " '" + path + "' does not exist");
    if (why.message() == "is a symbolic link") return InvalidArgument(what + " '" + path + "' is a symbolic link: refused");
    return InvalidArgument("cannot open " + what + " '" + path + "': " + why.message());
  }
  CheckedFile file(std::move(opened).value(), 0, rules);
  if (!root.empty()) {
    // What was opened, not what the path said a moment before: a folder on the way swapped for a link
    // in between shows here.
    const std::string really = file.file_.OpenedPath();
    if (!really.empty() && !PathInside(root, really)) {
      return InvalidArgument(what + " '" + path + "' changed into a link out of " + root + " while it was opened");
    }
  }
  Result<port::FileInfo> info = file.file_.Info();
  if (!info.ok()) return Internal("cannot stat " + what + " '" + path + "': " + info.status().message());
  if (info->kind != port::FileKind::kRegular) {
    return InvalidArgument(what + " '" + path + "' is " + KindOf(info->kind) + ", not a regular file: refused");
  }
  if (rules.own_private) {
    if (!info->owned_by_me) {
      return InvalidArgument(what + " '" + path + "' belongs to user " + std::to_string(info->owner) +
                             ", not to this process's user: refused");
    }
    if (info->writable_by_others) {
      return InvalidArgument(what + " '" + path + "' is writable by group or others (mode " + Octal(info->mode) +
                             "): refused");
    }
  }
  const uint64_t size = static_cast<uint64_t>(info->identity.size);
  if (rules.max_bytes > 0 && size > rules.max_bytes) return OverCap(rules, path, std::to_string(size) + " bytes");
  file.size_ = size;
  return file;
}

Result<size_t> CheckedFile::Read(void* buffer, size_t n) {
  Result<size_t> got = file_.Read(buffer, n);
  if (!got.ok()) return Internal("cannot read " + rules_.what + ": " + got.status().message());
  return got;
}

Result<std::string> CheckedFile::ReadAll() {
  std::string text;
  char chunk[64 * 1024];
  while (true) {
    Result<size_t> n = Read(chunk, sizeof chunk);
    if (!n.ok()) return n.status();
    if (*n == 0) return text;
    text.append(chunk, *n);
    if (rules_.max_bytes > 0 && text.size() > rules_.max_bytes) {
      return InvalidArgument("larger than the limit of " + CapText(rules_.max_bytes) + " for " + rules_.what +
                             " (it grew while it was read): refused");
    }
  }
}

Result<std::shared_ptr<FileCopy>> CheckedFile::Copy() {
  if (size_ == 0) return InvalidArgument(rules_.what + " is empty");
  const size_t page = port::PageSize();
  const size_t mapped = (static_cast<size_t>(size_) + page - 1) / page * page;
  // Anonymous pages of our own, faulted in at once (one pass instead of a fault per page while reading).
  void* data = port::AllocatePages(mapped);
  if (data == nullptr) {
    return ResourceExhausted("cannot allocate " + std::to_string(size_) + " bytes for " + rules_.what);
  }
  std::shared_ptr<FileCopy> copy(new FileCopy(data, static_cast<size_t>(size_), mapped));
  size_t filled = 0;
  while (filled < size_) {
    Result<size_t> n = Read(static_cast<char*>(data) + filled, static_cast<size_t>(size_) - filled);
    if (!n.ok()) return n.status();
    if (*n == 0) return InvalidArgument(rules_.what + " shrank while it was read (truncated)");
    filled += *n;
  }
  char extra;
  Result<size_t> more = Read(&extra, 1);
  if (!more.ok()) return more.status();
  if (*more != 0) return InvalidArgument(rules_.what + " grew while it was read");
  port::ProtectPagesReadOnly(data, mapped);  // nothing in this process writes it either
  return copy;
}

Result<std::shared_ptr<FileMapping>> CheckedFile::Map() {
  if (size_ == 0) return InvalidArgument(rules_.what + " is empty");
  Result<std::unique_ptr<port::GuardedMapping>> mapping =
      port::GuardedMapping::Map(file_, static_cast<size_t>(size_));
  if (!mapping.ok()) {
    const Status& why = mapping.status();
    if (why.code() == StatusCode::kUnavailable) {
      return Unavailable(rules_.what + " cannot be mapped safely: " + why.message());
    }
    return Status(why.code(), rules_.what + " " + why.message());
  }
  return std::make_shared<FileMapping>(std::move(mapping).value());
}

Status CheckedFile::MakePrivate() {
  Status st = file_.MakePrivate();
  if (!st.ok()) return Internal("cannot make " + rules_.what + " private: " + st.message());
  return Status::Ok();
}

Result<std::string> ReadCheckedFile(const std::string& path, const FileRules& rules) {
  Result<CheckedFile> file = CheckedFile::Open(path, rules);
  if (!file.ok()) return file.status();
  Result<std::string> text = file->ReadAll();
  if (!text.ok()) return Status(text.status().code(), "'" + path + "': " + text.status().message());
  return text;
}

Status CheckPrivateFolder(const std::string& folder) {
  Result<port::FileInfo> info = port::StatPath(folder, /*follow_links=*/true);
  if (!info.ok()) return FailedPrecondition("cannot look at '" + folder + "': " + info.status().message());
  if (info->kind != port::FileKind::kFolder) return FailedPrecondition("'" + folder + "' is not a folder");
  if (!info->owned_by_me) {
    return FailedPrecondition("the folder '" + folder + "' belongs to user " + std::to_string(info->owner) +
                              ", not to this process's user");
  }
  if (info->writable_by_others) {
    return FailedPrecondition("the folder '" + folder + "' is writable by group or others (mode " +
                              Octal(info->mode) + "; make it 0700, or name a new folder, which ebb creates so)");
  }
  return Status::Ok();
}

Status WritePrivateFile(const std::string& path, const std::string& text) {
  return port::WriteNewPrivateFile(path, text);
}

}  // namespace ebb::detail
