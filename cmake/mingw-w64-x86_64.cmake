# Cross-building ebb for Windows x64 with Debian's MinGW-w64 (posix threads:
# std::thread and std::mutex work). `make windows` uses it; see docs/windows.md.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(EBB_MINGW_PREFIX x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${EBB_MINGW_PREFIX}-gcc-posix)
set(CMAKE_CXX_COMPILER ${EBB_MINGW_PREFIX}-g++-posix)
set(CMAKE_RC_COMPILER ${EBB_MINGW_PREFIX}-windres)
set(CMAKE_AR ${EBB_MINGW_PREFIX}-ar CACHE FILEPATH "")
set(CMAKE_RANLIB ${EBB_MINGW_PREFIX}-ranlib CACHE FILEPATH "")
# Where the target's libraries are: MinGW's own and the prefix scripts/setup-windows.sh builds into
# (EBB_MINGW_DEPS, set by the Makefile). Never the build machine's /usr/include or /usr/lib.
set(CMAKE_FIND_ROOT_PATH /usr/${EBB_MINGW_PREFIX} ${EBB_MINGW_DEPS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The MinGW runtime (libgcc, libstdc++, winpthread) linked in, so that an .exe or .dll needs no MinGW DLL beside it.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static")
# Running the tests' executables (gtest_discover_tests, try_run) goes through Wine.
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/lib/wine/wine64)
