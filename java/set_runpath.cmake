# The native libraries the jar carries look for each other beside themselves only:
#   cmake -DFILE=<lib.so> -P set_runpath.cmake
# sets the file's RUNPATH to $ORIGIN (the build tree's paths are not shipped in the jar).
file(RPATH_SET FILE "${FILE}" NEW_RPATH "$ORIGIN")
