# The runtime library's dependencies in the Windows cross-build (included by CMakeLists.txt when WIN32).
# EBB_MINGW_DEPS: the prefix scripts/setup-windows.sh fills (.deps/mingw/prefix); its headers/ folder
# beside it holds links to the header-only libraries (never /usr/include itself: glibc's headers would
# collide with MinGW's).
set(EBB_MINGW_DEPS "${PROJECT_SOURCE_DIR}/.deps/mingw/prefix" CACHE PATH "MinGW builds of ebb's dependencies")
set(EBB_MINGW_HEADERS "${EBB_MINGW_DEPS}/../headers")
set(EBB_ORT_WINDOWS "${PROJECT_SOURCE_DIR}/third_party/onnxruntime-windows" CACHE PATH
    "onnxruntime.dll and its import library (scripts/setup-windows.sh)")

add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
set_target_properties(nlohmann_json::nlohmann_json PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_HEADERS}")
# xxHash as its header says it may be used: every function inline, no library.
add_library(PkgConfig::XXHASH INTERFACE IMPORTED)
set_target_properties(PkgConfig::XXHASH PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_HEADERS}"
                      INTERFACE_COMPILE_DEFINITIONS XXH_INLINE_ALL)

find_library(EBB_WIN_PNG NAMES png16 libpng16 png16_static PATHS "${EBB_MINGW_DEPS}/lib" NO_DEFAULT_PATH REQUIRED)
find_library(EBB_WIN_ZLIB NAMES zlibstatic PATHS "${EBB_MINGW_DEPS}/lib" NO_DEFAULT_PATH REQUIRED)
find_library(EBB_WIN_JPEG NAMES libjpeg.a jpeg PATHS "${EBB_MINGW_DEPS}/lib" NO_DEFAULT_PATH REQUIRED)
add_library(PkgConfig::PNG INTERFACE IMPORTED)
set_target_properties(PkgConfig::PNG PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_DEPS}/include"
                      INTERFACE_LINK_LIBRARIES "${EBB_WIN_PNG};${EBB_WIN_ZLIB}")
add_library(PkgConfig::JPEG INTERFACE IMPORTED)
set_target_properties(PkgConfig::JPEG PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_DEPS}/include"
                      INTERFACE_LINK_LIBRARIES "${EBB_WIN_JPEG}")

# Delay-loaded (the import library dlltool -y made, scripts/setup-windows.sh; its helper
# __delayLoadHelper2 is MinGW's): onnxruntime.dll is loaded at the first call into it, after
# port::CheckOrtLibrary (ebb.exe's main, Runtime::Create) has said which DLL is missing, if one is.
add_library(onnxruntime::onnxruntime SHARED IMPORTED)
set_target_properties(onnxruntime::onnxruntime PROPERTIES
  IMPORTED_LOCATION "${EBB_ORT_WINDOWS}/bin/onnxruntime.dll"
  IMPORTED_IMPLIB "${EBB_ORT_WINDOWS}/lib/libonnxruntime.delay.a"
  INTERFACE_INCLUDE_DIRECTORIES "${EBB_ORT_ROOT}/include")
# ORT's headers redefine MinGW's SAL macros: a warning in every file (-isystem keeps them quiet).
set_target_properties(onnxruntime::onnxruntime PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${EBB_ORT_ROOT}/include")

# The server's and the CLI's dependencies (called from CMakeLists.txt's server section): prometheus-cpp's
# core built by setup-windows.sh from its Debian source package; Boost.Asio/Beast, cpp-httplib, RapidJSON
# and CLI11 header-only, as they are; zlib from the prefix.
macro(ebb_windows_server_deps)
  add_library(Boost::headers INTERFACE IMPORTED)
  set_target_properties(Boost::headers PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_HEADERS}"
                        INTERFACE_LINK_LIBRARIES "ws2_32;mswsock")
  add_library(ZLIB::ZLIB INTERFACE IMPORTED)
  set_target_properties(ZLIB::ZLIB PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_DEPS}/include"
                        INTERFACE_LINK_LIBRARIES "${EBB_WIN_ZLIB}")
  add_library(PkgConfig::HTTPLIB INTERFACE IMPORTED)
  set_target_properties(PkgConfig::HTTPLIB PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_DEPS}/include"
                        INTERFACE_LINK_LIBRARIES "ws2_32;crypt32")
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${EBB_MINGW_HEADERS}")
  set(EBB_RAPIDJSON_INCLUDE_DIR "${EBB_MINGW_HEADERS}")
  set(EBB_FAST_FLOAT_INCLUDE_DIR "${EBB_MINGW_HEADERS}")
  set(EBB_FMT_INCLUDE_DIR "${EBB_MINGW_HEADERS}")
endmacro()

# ONNX Runtime's DLLs beside the programs of the build folder (Windows looks for a DLL beside the .exe).
file(COPY "${EBB_ORT_WINDOWS}/bin/" DESTINATION "${CMAKE_BINARY_DIR}" FILES_MATCHING PATTERN "*.dll")
