// Every file in tests/data/malformed/ must be rejected with a one-line InputError that names the file; the
// cases come from the directory listing, so adding a file adds a test. Files in tests/data/valid/ must
// parse, and those in tests/data/nonfinite/ must parse but fail require_finite.
// Fixtures: tests/data/make_io_fixtures.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>

#include "test_files.hpp"

namespace regatta::io {
namespace {

std::vector<std::string> files_in(const std::string& subdir) {
  std::vector<std::string> names;
  const auto dir = test::data_dir() / subdir;
  if (std::filesystem::is_directory(dir))
    for (const auto& entry : std::filesystem::directory_iterator(dir))
      if (entry.is_regular_file()) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

/// Reads `path` with the reader its extension selects; returns the number of arrays read.
std::size_t read_any(const std::filesystem::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".npy") {
    const Array a = read_npy(path);
    return a.data.size() == a.size() ? 1 : 0;
  }
  if (ext == ".npz") return read_npz(path).size();
  if (ext == ".safetensors") return read_safetensors(path).size();
  if (ext == ".json") return read_json(path).is_discarded() ? 0 : 1;
  ADD_FAILURE() << "no reader for " << path << "; name fixtures *.npy, *.npz, *.safetensors or *.json";
  return 0;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class MalformedFile : public ::testing::TestWithParam<std::string> {};

TEST_P(MalformedFile, IsRejectedWithOneLineMessageNamingTheFile) {
  const auto path = test::data_dir() / "malformed" / GetParam();
  try {
    read_any(path);
    FAIL() << GetParam() << " was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find(GetParam()), std::string::npos) << message;
    EXPECT_LT(message.size(), 600u) << message;
    EXPECT_EQ(detail::printable(message, message.size()), message) << "control bytes or invalid UTF-8";
    std::cout << "    " << message.substr(message.find(GetParam())) << "\n";
  } catch (const std::exception& e) {
    FAIL() << GetParam() << " threw something other than InputError: " << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(io, MalformedFile, ::testing::ValuesIn(files_in("malformed")), test_name);

/// tests/data/hostile/ (tests/data/make_hostile_fixtures.py): files built to exhaust the stack, memory or
/// time of a reader. Each must be rejected like a malformed file; a crash or a decompression bomb shows as a
/// failed or timed-out test.
class HostileFile : public ::testing::TestWithParam<std::string> {};

TEST_P(HostileFile, IsRejectedWithOneLineMessageNamingTheFile) {
  const auto path = test::data_dir() / "hostile" / GetParam();
  try {
    read_any(path);
    FAIL() << GetParam() << " was accepted";
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find(GetParam()), std::string::npos) << message;
    EXPECT_LT(message.size(), 600u) << message;
    std::cout << "    " << message.substr(message.find(GetParam())) << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(io, HostileFile, ::testing::ValuesIn(files_in("hostile")), test_name);

class ValidFile : public ::testing::TestWithParam<std::string> {};

TEST_P(ValidFile, Parses) {
  const auto path = test::data_dir() / "valid" / GetParam();
  EXPECT_GE(read_any(path), 1u);
}

INSTANTIATE_TEST_SUITE_P(io, ValidFile, ::testing::ValuesIn(files_in("valid")), test_name);

/// Every single-byte corruption of every valid file is either read or rejected with InputError: no other
/// exception, no crash, no out-of-bounds access (the sanitizer build checks the last).
TEST(ioCorpus, EveryByteFlipOfAValidFileIsHandled) {
  test::ScratchDir dir;
  std::size_t rejected = 0, accepted = 0;
  for (const auto& name : files_in("valid")) {
    const auto original = test::raw_bytes(test::data_dir() / "valid" / name);
    const auto mutant_path = dir / name;
    for (std::size_t i = 0; i < original.size(); ++i) {
      for (unsigned char flip : {0xFF, 0x01}) {
        auto bytes = original;
        bytes[i] ^= std::byte{flip};
        try {
          const std::string ext = mutant_path.extension().string();
          if (ext == ".npy") {
            parse_npy(bytes, name);
          } else if (ext == ".safetensors") {
            parse_safetensors(bytes, name);
          } else {
            if (flip != 0xFF) continue;  // archives are slower (a file each); one flip pattern suffices
            write_file_atomic(mutant_path, bytes);
            read_any(mutant_path);
          }
          ++accepted;
        } catch (const InputError& e) {
          ++rejected;
          ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
        } catch (const std::exception& e) {
          FAIL() << name << " byte " << i << ": " << e.what();
        }
      }
    }
  }
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(accepted, 0u);  // flips inside the data are legitimate values
}

TEST(ioCorpus, ThereAreEnoughCases) {
  EXPECT_GE(files_in("malformed").size(), 40u);
  EXPECT_GE(files_in("hostile").size(), 10u);
  EXPECT_GE(files_in("valid").size(), 10u);
}

TEST(ioJson, WriteThenReadAndSyntaxErrorsGiveTheLine) {
  test::ScratchDir dir;
  const nlohmann::json report = {{"epsilon", 0.1}, {"steps", {1, 2, 3}}, {"name", "caf\u00e9"}};
  write_json(dir / "report.json", report);
  EXPECT_EQ(read_json(dir / "report.json"), report);
  try {
    read_json(test::data_dir() / "malformed" / "bad_syntax.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bad_syntax.json: invalid JSON: parse error at line 4, column 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(write_json(dir / "bad.json", nlohmann::json("\xff")), InputError);  // not UTF-8
}

TEST(ioNonFinite, NanPayloadParsesButIsNotFinite) {
  const auto path = test::data_dir() / "nonfinite" / "nan_payload.npy";
  const Array a = read_npy(path);  // np.array([1, 2, nan, 4])
  ASSERT_EQ(a.data.size(), 4u);
  try {
    require_finite(a);
    FAIL();
  } catch (const InputError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("nan_payload.npy"), std::string::npos) << message;
    EXPECT_NE(message.find("entry 2 is NaN"), std::string::npos) << message;
  }
}

TEST(ioNonFinite, InfPayloadNamesTheIndex) {
  const Array a =
      read_npy(test::data_dir() / "nonfinite" / "inf_payload.npy");  // [[1, 2], [3, -inf]] float32
  try {
    require_finite(a);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 3 (index (1, 1)) is infinite"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace regatta::io
