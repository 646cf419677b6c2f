// Reads tests/data/response_templates/ (see golden_corpus.h).
#include "golden_corpus.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace beam::server::testing {
namespace {

Json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

GoldenCorpus load_corpus() {
  GoldenCorpus corpus;
  const std::filesystem::path dir =
      std::filesystem::path(BEAMSERVE_SOURCE_DIR) / "tests/data/response_templates";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    const Json doc = read_json(path);
    if (path.filename() == "schema_errors.json") {
      for (const Json& c : doc["cases"]) {
        corpus.schema_errors.push_back({c["name"].get<std::string>(), c["template"],
                                        c["expected_error"]["message"].get<std::string>()});
      }
      continue;
    }
    GoldenTemplate t{doc["name"].get<std::string>(),
                     doc["generated_by"].get<std::string>(),
                     doc["template"],
                     {}};
    for (const Json& c : doc["cases"]) {
      GoldenCase gc{c["name"].get<std::string>(),
                    c["prefix"].get<std::string>(),
                    c["output"].get<std::string>(),
                    c["tools"],
                    Json(),
                    std::nullopt};
      if (c.contains("expected_error")) {
        gc.expected_error = c["expected_error"];
      } else {
        gc.expected = c["expected"];
      }
      t.cases.push_back(std::move(gc));
    }
    corpus.templates.push_back(std::move(t));
  }
  return corpus;
}

}  // namespace

const GoldenCorpus& golden_corpus() {
  static const GoldenCorpus corpus = load_corpus();
  return corpus;
}

}  // namespace beam::server::testing
