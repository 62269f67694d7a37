// Internal: reading model files without keeping a copy of them. A model is
// identified by the SHA-256 of its bytes, hashed while streaming the file in
// chunks (nothing of the file stays in memory), and loaded by ONNX Runtime
// from its path; FileIdentity tells whether the file changed in between.
//
// Thread safety: free functions are reentrant.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ebb/status.h"
#include "port.h"

namespace ebb::detail {

// What tells one version of a file from another without reading it (see
// port::FileIdentity).
using FileIdentity = port::FileIdentity;

// Whether a file of this identity last changed (ctime) over 2 s ago: any
// later write gives it another identity, even on a file system whose clock
// is coarse, so what was read of it can be remembered by identity.
bool Settled(const FileIdentity& identity);

// The identity of the file at `path`. Errors: kNotFound, kInvalidArgument
// (not a regular file).
Result<FileIdentity> StatFile(const std::string& path);

// Hex SHA-256 of bytes in memory.
std::string Sha256Hex(const void* data, size_t size);

// Hex SHA-256 of the file at `path`, read in 1 MiB chunks, and the identity of
// what was read (taken from the open file, so a rename in between is seen).
// Re-loads skip the reading: the process remembers the hashes of files whose
// last change (ctime) was over 2 s before they were hashed, by identity; a
// later write changes the ctime (the 2 s cover coarse file system clocks), so
// a remembered hash is never stale. At most 1024 are remembered.
// Errors: kNotFound, kInvalidArgument (not a regular file, empty), kInternal
// (read error).
Result<std::string> Sha256OfFile(const std::string& path, FileIdentity* identity);

}  // namespace ebb::detail
