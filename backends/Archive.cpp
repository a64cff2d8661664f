#include "backends/Archive.h"

#include <Halide.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/Lower.h"
#include "dsl/Error.h"
#include "dsl/ReadFile.h"

namespace pto {
namespace {

constexpr size_t kHeader = 60;  // ar member header: name[16] date[12] uid[6] gid[6] mode[8] size[10] fmag[2]

std::string trim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

}  // namespace

std::vector<ArchiveMember> read_archive(const std::string& path) {
  const std::string a = read_file(path, "cannot open archive");
  if (a.compare(0, 8, "!<arch>\n") != 0) throw Error("'" + path + "' is not an ar archive (no !<arch> magic)");
  std::vector<ArchiveMember> out;
  std::string long_names;
  size_t pos = 8;
  while (pos + kHeader <= a.size()) {
    const std::string hdr = a.substr(pos, kHeader);
    if (hdr.compare(58, 2, "`\n") != 0)
      throw Error("archive '" + path + "': bad member header at byte " + std::to_string(pos));
    size_t size = 0;
    try {
      size = std::stoul(trim(hdr.substr(48, 10)));
    } catch (const std::logic_error&) {
      throw Error("archive '" + path + "': bad member size at byte " + std::to_string(pos));
    }
    pos += kHeader;
    if (pos + size > a.size()) throw Error("archive '" + path + "': member at byte " + std::to_string(pos) + " is truncated");
    std::string name = trim(hdr.substr(0, 16));
    std::string data = a.substr(pos, size);
    pos += size + (size & 1);  // members are 2-byte aligned
    if (name == "/" || name == "/SYM64/" || name == "__.SYMDEF" || name == "__.SYMDEF SORTED") continue;
    if (name == "//") {
      long_names = std::move(data);
      continue;
    }
    if (name.rfind("#1/", 0) == 0) {  // BSD: the name precedes the data
      const size_t n = std::stoul(name.substr(3));
      name = data.substr(0, n);
      name = name.substr(0, name.find('\0'));
      data.erase(0, n);
    } else if (name.size() > 1 && name[0] == '/') {  // GNU: offset into the long-name table
      const size_t off = std::stoul(name.substr(1));
      if (off >= long_names.size()) throw Error("archive '" + path + "': long-name offset " + std::to_string(off) + " out of range");
      name = long_names.substr(off, long_names.find('\n', off) - off);
    }
    if (!name.empty() && name.back() == '/') name.pop_back();
    out.push_back({name, std::move(data)});
  }
  return out;
}

void merge_archives(const std::vector<std::string>& archives, const std::vector<std::string>& objects,
                    const std::string& halide_target, const std::string& scratch_dir, const std::string& dst) {
  namespace fs = std::filesystem;
  fs::create_directories(scratch_dir);
  std::vector<std::string> files;
  for (size_t i = 0; i < archives.size(); ++i) {
    for (const ArchiveMember& m : read_archive(archives[i])) {
      const fs::path f = fs::path(scratch_dir) / (std::to_string(i) + "_" + fs::path(m.name).filename().string());
      std::ofstream(f, std::ios::binary).write(m.data.data(), static_cast<std::streamsize>(m.data.size()));
      files.push_back(f.string());
    }
  }
  // create_static_library() wants every input in one directory.
  for (const std::string& o : objects) {
    const fs::path f = fs::path(scratch_dir) / ("obj_" + fs::path(o).filename().string());
    fs::copy_file(o, f, fs::copy_options::overwrite_existing);
    files.push_back(f.string());
  }
  with_halide_errors("writing static library '" + dst + "'", [&] {
    Halide::create_static_library(files, Halide::Target(halide_target), dst);
    return 0;
  });
}

}  // namespace pto
