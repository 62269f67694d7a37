// Internal: opening files ebb reads but did not write in this process, with
// the checks that keep a hostile or careless file from escaping, blocking,
// or exhausting memory. Every such open goes through CheckedFile::Open; the
// operating-system calls for it (open, fstat, read, realpath, fchmod, mmap)
// are the port layer's (src/port/port.h).
//
// Two kinds of rules:
//   - Beside a model (config.json, labels.txt): `root` set. The path must
//     resolve to `root` or below (links inside it are followed, links out
//     refused), and the opened file must be there too.
//   - The optimized-model cache's own files: `own_private` set. The file
//     must not be a symbolic link, and must be owned by this process's user
//     and not writable by group or others.
// A user's own path (`follow_links`): links are followed (the user named it).
// Always: opened O_RDONLY | O_NONBLOCK | O_CLOEXEC (a FIFO or device never
// blocks the open), O_NOFOLLOW on the final name, a regular file by fstat on
// the opened descriptor, at most `max_bytes` (checked on fstat's size and
// again while reading, so a file that grows, or claims size 0, is still
// bounded).
//
// Thread safety: free functions are reentrant; a CheckedFile is one open
// descriptor (move-only), a FileCopy or FileMapping immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "ebb/status.h"
#include "port.h"

namespace ebb::detail {

struct FileRules {
  // How messages name the file ("labels.txt", "the cache entry's header").
  std::string what;
  // Non-empty: the file must resolve to this folder or below.
  std::string root;
  // The file must be this user's, not writable by group or others, no link.
  bool own_private = false;
  // A path the user named (a file given on the command line): links on the way and in the final
  // name are followed, and the checks apply to the file they lead to. Not with `root` or
  // `own_private`, whose rules are about links.
  bool follow_links = false;
  // The largest file accepted; 0 = no cap (the cache's entries, bounded by
  // the cache's max_bytes instead).
  uint64_t max_bytes = 0;
};

// A file's bytes held by this process, which nothing done to the file
// afterwards — truncated, rewritten in place, removed — changes or makes
// fault: a FileCopy or a FileMapping. Given back when the object goes.
class FileBytes {
 public:
  virtual ~FileBytes() = default;
  virtual const void* data() const = 0;
  virtual size_t size() const = 0;
};

// A file's bytes copied into anonymous memory of this process (read-only
// once filled).
class FileCopy : public FileBytes {
 public:
  ~FileCopy() override;
  FileCopy(const FileCopy&) = delete;
  FileCopy& operator=(const FileCopy&) = delete;

  const void* data() const override { return data_; }
  size_t size() const override { return size_; }

 private:
  friend class CheckedFile;
  FileCopy(void* data, size_t size, size_t mapped) : data_(data), size_(size), mapped_(mapped) {}
  void* data_;
  size_t size_;
  size_t mapped_;  // bytes of the anonymous mapping (size_ rounded up to pages)
};

// A file's bytes mapped read-only, shared with the system's file cache (no
// copy), and guarded against writes to the file (port::GuardedMapping: a
// write makes the mapping a private copy first, or is refused).
class FileMapping : public FileBytes {
 public:
  explicit FileMapping(std::unique_ptr<port::GuardedMapping> mapping) : mapping_(std::move(mapping)) {}
  const void* data() const override { return mapping_->data(); }
  size_t size() const override { return mapping_->size(); }
  // The version of the file mapped (port::GuardedMapping::identity).
  const port::FileIdentity& identity() const { return mapping_->identity(); }

 private:
  std::unique_ptr<port::GuardedMapping> mapping_;
};

// An open file that passed its rules; closed with the object.
class CheckedFile {
 public:
  // Opens `path` under `rules`. Errors: kNotFound (nothing at the path, not
  // even a dangling link), kInvalidArgument (outside the root, a link where
  // none is allowed, not a regular file, not this user's or writable by
  // others, over the cap; the message names the file and the rule),
  // kInternal (an I/O error).
  static Result<CheckedFile> Open(const std::string& path, const FileRules& rules);

  CheckedFile(CheckedFile&& other) noexcept = default;
  CheckedFile& operator=(CheckedFile&& other) noexcept = default;
  CheckedFile(const CheckedFile&) = delete;
  CheckedFile& operator=(const CheckedFile&) = delete;
  ~CheckedFile() = default;

  // The size fstat gave when it was opened.
  uint64_t size() const { return size_; }

  // The whole file (at most the cap: more is kInvalidArgument).
  Result<std::string> ReadAll();
  // The whole file copied into memory of its own (the cap applies too; a
  // size that differs from fstat's at open is kInvalidArgument).
  Result<std::shared_ptr<FileCopy>> Copy();
  // The whole file mapped (FileMapping), which must still be the size fstat
  // gave at open once guarded; the file is the mapping's afterwards (this
  // object is closed). kUnavailable where no guard can be had (then this
  // object is still open: Copy instead); kInvalidArgument for a file whose
  // size changed or that is empty.
  Result<std::shared_ptr<FileMapping>> Map();
  // Up to `n` bytes from the current position; 0 at the end.
  Result<size_t> Read(void* buffer, size_t n);
  // Mode 0600 (for a file this user just had written: whatever the umask).
  Status MakePrivate();

 private:
  CheckedFile(port::ReadOnlyFile file, uint64_t size, FileRules rules)
      : file_(std::move(file)), size_(size), rules_(std::move(rules)) {}
  port::ReadOnlyFile file_;
  uint64_t size_ = 0;
  FileRules rules_;
};

// Opens and reads `path` under `rules` (CheckedFile::Open, then ReadAll).
Result<std::string> ReadCheckedFile(const std::string& path, const FileRules& rules);

// Whether `folder` may hold files this process trusts: a folder (links to
// one are followed), owned by this user, not writable by group or others.
// Errors: kFailedPrecondition naming what is wrong (owner, mode).
Status CheckPrivateFolder(const std::string& folder);

// Writes `text` to a new file at `path` (mode 0600, refused if anything is
// there already, a link included).
Status WritePrivateFile(const std::string& path, const std::string& text);

// "64 KiB", "4 MiB", "123 bytes": a cap as messages state it.
std::string CapText(uint64_t bytes);


}  // namespace ebb::detail
