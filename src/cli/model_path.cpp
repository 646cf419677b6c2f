// resolve_model_dir: looks beside the executable (build/<preset>/beamserve → ../../models) and
// under the current directory, so `build/beamserve generate` works from a fresh clone.
#include "cli/model_path.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace beam::cli {

Expected<std::string> resolve_model_dir(const std::optional<std::string>& flag) {
  namespace fs = std::filesystem;
  if (flag) return *flag;
  if (const char* env = std::getenv("BEAMSERVE_MODEL"); env && *env) return std::string(env);
  std::vector<fs::path> roots;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty() && p != p.root_path(); p = p.parent_path())
      roots.push_back(p);
  }
  roots.push_back(fs::current_path(ec));
  for (const char* name : {"beam-nano", "tiny-beam"}) {
    for (const auto& root : roots) {
      fs::path candidate = root / "models" / name;
      if (fs::exists(candidate / "config.json", ec)) return candidate.string();
    }
  }
  return make_error("no --model given and no default model found (looked for models/beam-nano and "
                    "models/tiny-beam above the executable and in the current directory)");
}

}  // namespace beam::cli
