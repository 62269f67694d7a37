"""The Windows wheel of `make windows-dist` (ebb-<version>-py3-none-win_amd64.whl): its contents, and that its
Python files load the C API by the name the Windows build gives it.

    /usr/bin/python3 tests/windows/wheel_test.py WHEEL BUILD_WINDOWS_DIR

Checks: the tag and RECORD (every file listed with its sha256); the package's Python files; ebb.dll
byte-identical to the Windows build's and onnxruntime.dll beside it, nothing for Linux (no .so) and no CUDA
provider; the name the package's loader (ebb/_lib.py) uses on Windows, read by running that file's own
choice with sys.platform == "win32", equals the DLL the build wrote (CMake's ebb_c: ebb.dll, not libebb.dll)
and a file in the wheel; and each C API function _lib.py declares is exported by that ebb.dll (its export
table, read with objdump), so the import cannot fail on a missing symbol. Standard library and objdump only.
"""
import ast
import base64
import hashlib
import pathlib
import re
import subprocess
import sys
import zipfile


def fail(message: str) -> None:
    print(f"wheel_test: {message}")
    sys.exit(1)


def main() -> None:
    wheel, build = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    if not wheel.name.endswith("-py3-none-win_amd64.whl"):
        fail(f"{wheel.name} is not tagged py3-none-win_amd64")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        files = {n: z.read(n) for n in names}
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL"))
    if "Tag: py3-none-win_amd64" not in files[f"{dist_info}/WHEEL"].decode():
        fail("WHEEL has no Tag: py3-none-win_amd64")
    for line in files[f"{dist_info}/RECORD"].decode().splitlines():
        name, digest, _ = line.split(",")
        if not digest:
            continue
        got = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(files[name]).digest()).rstrip(b"=").decode()
        if got != digest:
            fail(f"RECORD's hash of {name} is wrong")
    for need in ("ebb/__init__.py", "ebb/_lib.py", "ebb/_ebb.py", "ebb/_pool.py", "ebb/_tensors.py",
                 "ebb/_errors.py", "ebb/ebb.dll", "ebb/onnxruntime.dll"):
        if need not in names:
            fail(f"{need} is missing")
    if any(n.endswith((".so", ".so.1")) or "providers_cuda" in n for n in names):
        fail("a Linux library or the CUDA provider is in the Windows wheel")
    built_dll = build / "ebb.dll"
    if files["ebb/ebb.dll"] != built_dll.read_bytes():
        fail(f"ebb/ebb.dll differs from {built_dll}")

    # The loader's choice on Windows: the assignments of LIBRARY under `if sys.platform == "win32":` in _lib.py.
    tree = ast.parse(files["ebb/_lib.py"].decode())
    chosen = None
    for node in tree.body:
        if isinstance(node, ast.If) and "win32" in ast.unparse(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and ast.unparse(stmt.targets[0]) == "LIBRARY":
                    chosen = ast.literal_eval(stmt.value)
    if chosen != built_dll.name or f"ebb/{chosen}" not in names:
        fail(f"_lib.py loads {chosen!r} on Windows; the build wrote {built_dll.name} and the wheel holds "
             f"{sorted(n for n in names if n.endswith('.dll'))}")

    declared = set(re.findall(r'"(ebb_[a-z0-9_]+)": \(', files["ebb/_lib.py"].decode()))
    exports = subprocess.run(["x86_64-w64-mingw32-objdump", "-p", str(built_dll)], capture_output=True, text=True)
    if exports.returncode != 0:
        fail(f"objdump: {exports.stderr}")
    exported = set(re.findall(r"\]\s+(ebb_[a-z0-9_]+)", exports.stdout))
    missing = sorted(declared - exported)
    if missing:
        fail(f"{built_dll.name} does not export what _lib.py declares: {missing}")
    print(f"wheel_test: {wheel.name}: {len(names)} files, loads {chosen}, {len(declared)} C API functions exported")
    print("wheel_test: passed")


if __name__ == "__main__":
    main()
