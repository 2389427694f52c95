# Writes trace/schema.sql into a C++ header as one string (run by trace/CMakeLists.txt at build
# time: cmake -DIN=schema.sql -DOUT=schema_sql.hpp -P embed_schema.cmake). Nothing is downloaded.
file(READ "${IN}" sql)
string(FIND "${sql}" ")MHC_SCHEMA_SQL\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${IN} contains the header's raw-string delimiter")
endif()
file(WRITE "${OUT}.tmp" "// Generated from trace/schema.sql by trace/embed_schema.cmake: edit that file, not this one.\n#pragma once\nnamespace mhc::trace::schema {\ninline constexpr char kSchemaSql[] = R\"MHC_SCHEMA_SQL(${sql})MHC_SCHEMA_SQL\";\n}\n")
file(RENAME "${OUT}.tmp" "${OUT}")
