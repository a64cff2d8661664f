// A whole file read into a string, with a typed error naming the file: one
// reader for the places that load a file at once (archives, worker inputs).
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include "dsl/Error.h"

namespace pto {

// `cannot` starts the error message, e.g. "cannot open archive" -> cannot open archive 'x.a'.
inline std::string read_file(const std::string& path, const std::string& cannot = "cannot read") {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(cannot + " '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace pto
