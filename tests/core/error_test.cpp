// InputError messages stay one printable, bounded line whatever the names in them contain.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <regatta/core/error.hpp>

namespace regatta {
namespace {

TEST(Printable, EscapesControlsBackslashAndInvalidUtf8) {
  EXPECT_EQ(printable("plain.name_1"), "plain.name_1");
  EXPECT_EQ(printable("a\nb"), "a\\x0ab");
  EXPECT_EQ(printable("\x1b[31mred"), "\\x1b[31mred");
  EXPECT_EQ(printable("back\\slash"), "back\\slash");
  EXPECT_EQ(printable(printable("a\n\xff")), printable("a\n\xff"));  // idempotent
  EXPECT_EQ(printable(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc2\x9b"
                      "2J"),
            "\\xc2\\x9b2J");                                // C1 CSI
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  EXPECT_EQ(printable("\xe2\x80"), "\\xe2\\x80");           // truncated sequence
  EXPECT_EQ(printable("‖W‖₂ ≤ √d, é"), "‖W‖₂ ≤ √d, é");     // valid UTF-8 is kept
}

TEST(InputErrorMessage, IsOneBoundedLine) {
  const InputError e("model\n.safetensors", "tensor 'q\x1b]0;x\x07' is bad\r\n");
  const std::string what = e.what();
  EXPECT_EQ(what.find('\n'), std::string::npos);
  EXPECT_EQ(what.find('\x1b'), std::string::npos);
  EXPECT_EQ(what, "model\\x0a.safetensors: tensor 'q\\x1b]0;x\\x07' is bad\\x0d\\x0a");
  EXPECT_EQ(e.subject(), "model\n.safetensors");  // the raw subject stays available to callers

  const InputError longer("file.npz", std::string(100000, 'x'));
  const std::string cut = longer.what();
  EXPECT_LE(cut.size(), max_message_bytes);
  EXPECT_NE(cut.find("more bytes)"), std::string::npos);
}

TEST(NameList, ShowsAFewNamesAndCountsTheRest) {
  std::vector<std::string> names;
  for (int k = 0; k < 100000; ++k) names.push_back("t" + std::to_string(k));
  const std::string list = name_list(names, 3);
  EXPECT_EQ(list, "'t0', 't1', 't2' and 99997 more");
  EXPECT_EQ(name_list(std::vector<std::string>{"a\n"}), "'a\\x0a'");
  EXPECT_EQ(name_list(std::vector<std::string>{}), "");
}

}  // namespace
}  // namespace regatta
