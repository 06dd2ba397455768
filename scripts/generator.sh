# Sourced by the scripts that configure a build directory.
#
# cmake_generator DIR prints the -G arguments for DIR: Ninja for a new
# directory when ninja is installed (it builds the targets of one command
# line side by side, where make builds them one after the other with only
# each one's own units in parallel: a unity-built test suite is one unit),
# nothing for an existing one (it keeps the generator it was made with).
cmake_generator() {
  if [[ ! -f "$1/CMakeCache.txt" ]] && command -v ninja >/dev/null 2>&1; then
    echo "-G Ninja"
  fi
}
