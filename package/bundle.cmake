# Runs at install time (component "release"): copies into lib/ every shared library the
# installed ELF files need, directly or through each other, unless system-libs.txt lets the
# system provide it, and names the bundled CUPTI for `mhc record` (NVTX_INJECTION64_PATH).
# Inputs: MHC_BUNDLE_DIRS (where to look besides the system paths), MHC_SYSTEM_LIBS_FILE.
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")

file(STRINGS "${MHC_SYSTEM_LIBS_FILE}" system_libs REGEX "^[^#]")
set(exclude)
foreach(lib IN LISTS system_libs)
  string(REGEX REPLACE "([][.+*?^$()|\\])" "\\\\\\1" lib_re "${lib}")
  list(APPEND exclude "^${lib_re}$")
endforeach()

# ELF files only (libexec/gpu-check is a script).
set(executables)
set(libraries)
file(GLOB candidates "${prefix}/bin/*" "${prefix}/libexec/*" "${prefix}/lib/*.so*")
foreach(f IN LISTS candidates)
  file(READ "${f}" magic LIMIT 4 HEX)
  if(magic STREQUAL "7f454c46")
    if(f MATCHES "/lib/[^/]+$")
      list(APPEND libraries "${f}")
    else()
      list(APPEND executables "${f}")
    endif()
  endif()
endforeach()

file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${executables}
  LIBRARIES ${libraries}
  DIRECTORIES ${MHC_BUNDLE_DIRS}
  PRE_EXCLUDE_REGEXES ${exclude}
  POST_EXCLUDE_REGEXES "^${prefix}/lib/"
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  CONFLICTING_DEPENDENCIES_PREFIX conflict)
if(unresolved)
  message(FATAL_ERROR "bundle: cannot find ${unresolved} (add its folder to the search, or to system-libs.txt if every system has it)")
endif()
if(conflict_FILENAMES)
  message(FATAL_ERROR "bundle: more than one candidate for ${conflict_FILENAMES}")
endif()

foreach(dep IN LISTS resolved)
  # Bundled under the name the binaries ask for (the soname), with the content of the file.
  get_filename_component(name "${dep}" NAME)
  file(REAL_PATH "${dep}" real)
  message(STATUS "Bundling: ${prefix}/lib/${name} (from ${real})")
  file(COPY_FILE "${real}" "${prefix}/lib/${name}")
  if(name MATCHES "^libcupti\\.so")
    file(WRITE "${prefix}/lib/mhc_record_cupti_path.txt" "${name}\n")
  endif()
endforeach()

# A bundled library that needs another bundled one (libzip: libbz2, libcrypto) finds it beside
# itself: the binaries' RUNPATH $ORIGIN/../lib serves only their own needs, not their libraries'.
set(bundled_names)
foreach(dep IN LISTS resolved)
  get_filename_component(name "${dep}" NAME)
  list(APPEND bundled_names "${name}")
endforeach()
foreach(name IN LISTS bundled_names)
  execute_process(COMMAND "${MHC_PATCHELF}" --print-needed "${prefix}/lib/${name}"
                  OUTPUT_VARIABLE needed COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" needed "${needed}")
  foreach(need IN LISTS needed)
    list(FIND bundled_names "${need}" at)   # no if(IN_LIST): an install script has old policies
    if(NOT at EQUAL -1)
      message(STATUS "Bundling: ${prefix}/lib/${name} finds ${need} beside it (RUNPATH $ORIGIN)")
      execute_process(COMMAND "${MHC_PATCHELF}" --set-rpath "$ORIGIN" "${prefix}/lib/${name}"
                      COMMAND_ERROR_IS_FATAL ANY)
      break()
    endif()
  endforeach()
endforeach()
