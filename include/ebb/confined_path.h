// ebb/confined_path.h — a path confined to a root folder: the one check of where a path leads.
//
// Every file ebb reads from a place that someone else names must lie inside a
// root folder, whatever the path says: a repository's model folders and their
// files (with --confine-links), ModelMesh's model root and --model-dir, the
// external-data files beside a model, config.json and labels.txt. "..", an
// absolute path elsewhere, a symbolic link anywhere on the way: each is
// resolved before the check. One primitive decides it everywhere:
//   RealPath     where a path really leads (the system's realpath; on Windows
//                GetFinalPathNameByHandleW on the opened path), the root's too;
//   PathInside   a comparison of whole components, so that a root /a/b holds
//                /a/b/c but not /a/bc, reading nothing.
// ResolveUnder is the two together for a path named relative to the root (or
// absolute), with what its text says checked first.
//
// A check is of its moment: a file opened afterwards must be checked again on
// what was opened (CheckedFile does, model/file_access.h).
//
// Thread safety: functions of the file system; reentrant.
#pragma once

#include <string>

#include "ebb/status.h"

namespace ebb {

// The canonical absolute form of `path`: every link, "." and ".." resolved.
// Errors: kInvalidArgument, with the system's reason ("cannot be resolved
// (No such file or directory)"), a missing file included.
Result<std::string> RealPath(const std::string& path);

// Whether `path` is `root` or below it, comparing whole components ("/a/bc"
// is not below "/a/b"; a trailing separator on the root is ignored). Reads
// nothing: both must be in one form, real paths (RealPath) to check where a
// path leads, or lexically normal ones to check what it says.
bool PathInside(const std::string& root, const std::string& path);

// `path`, relative to `root` or absolute, resolved to its real path, which must
// be `root`'s real path or below it. Its text is checked first, so that a path
// that names a place outside says so even when nothing is there: relative, it
// must stay inside after "." and ".." are applied; absolute, it must be below
// the root as given or as resolved. Messages have no subject, for the caller's
// ("model path 'x' " + message); `root_name` names the root in them ("the
// model's folder"; "" names it by its path).
// Errors: kInvalidArgument "leaves <root>" (the text) or "resolves outside
// <root> (to <real path>)" (a link on the way), or the system's reason;
// kNotFound "does not exist under <root> (looked for <path>)" (nothing there,
// a dangling link); kFailedPrecondition when the root itself cannot be resolved.
Result<std::string> ResolveUnder(const std::string& root, const std::string& path, const std::string& root_name = "");

// ResolveUnder(root, path), which must moreover not be the root itself: a model
// folder in a repository, a version folder in a model folder.
// Errors: as ResolveUnder; kInvalidArgument "is the folder itself".
Result<std::string> ResolveBelow(const std::string& root, const std::string& path);

}  // namespace ebb
