// The exclude list format (common/exclude_list.h): format/parse round trip, comments and blank
// lines, unknown keys, duplicates (first wins, first order kept), and every malformed line
// refused with its line number.
#include "common/exclude_list.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace ddp {
namespace {

std::vector<std::string> Nodes(const std::vector<ExcludeEntry>& entries) {
  std::vector<std::string> nodes;
  for (const ExcludeEntry& e : entries) nodes.push_back(e.node);
  return nodes;
}

TEST(ExcludeListTest, FormatThenParseRoundTrips) {
  ExcludeEntry full;
  full.node = "n2";
  full.section = "compute";
  full.relative_score = 0.48;
  full.time = 1764900000;
  full.job = "1234";
  ExcludeEntry bare;
  bare.node = "gpu-node.rack_3";
  EXPECT_EQ(FormatExcludeLine(full),
            "node=n2 section=compute relative_score=0.48 time=1764900000 job=1234");
  EXPECT_EQ(FormatExcludeLine(bare), "node=gpu-node.rack_3");
  auto parsed = ParseExcludeList(FormatExcludeLine(full) + "\n" + FormatExcludeLine(bare) + "\n");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 2u);
  const ExcludeEntry& a = (*parsed)[0];
  EXPECT_EQ(a.node, "n2");
  EXPECT_EQ(a.section, "compute");
  EXPECT_DOUBLE_EQ(a.relative_score, 0.48);
  EXPECT_EQ(a.time, 1764900000);
  EXPECT_EQ(a.job, "1234");
  const ExcludeEntry& b = (*parsed)[1];
  EXPECT_EQ(b.node, "gpu-node.rack_3");
  EXPECT_EQ(b.section, "");
  EXPECT_LT(b.relative_score, 0);
  EXPECT_EQ(b.time, 0);
  EXPECT_EQ(b.job, "");
}

TEST(ExcludeListTest, ValuesThatWouldSplitStayOneField) {
  ExcludeEntry e;
  e.node = "n1";
  e.job = "local job=7\tx";
  const std::string line = FormatExcludeLine(e);
  EXPECT_EQ(line, "node=n1 job=local_job_7_x");
  auto parsed = ParseExcludeList(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0].job, "local_job_7_x");
}

TEST(ExcludeListTest, CommentsBlankLinesUnknownKeysAndDuplicates) {
  const std::string text =
      "# written by the coordinator of job 1234\n"
      "\n"
      "node=n2 section=compute relative_score=0.48 time=1764900000 job=1234\n"
      "   # an indented comment\n"
      "  node=n5   future_key=whatever\tsection=data  \r\n"
      "node=n2 section=data\n"  // again: dropped, the first entry wins
      "future_key=1 node=n7\n";
  auto parsed = ParseExcludeList(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(Nodes(*parsed), (std::vector<std::string>{"n2", "n5", "n7"}));
  EXPECT_EQ((*parsed)[0].section, "compute");
  EXPECT_EQ((*parsed)[1].section, "data");
}

TEST(ExcludeListTest, EmptyListsParse) {
  for (const char* text : {"", "\n", "# nothing yet\n", "  \n\t\n"}) {
    auto parsed = ParseExcludeList(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
    EXPECT_TRUE(parsed->empty()) << text;
  }
}

TEST(ExcludeListTest, NodeNames) {
  EXPECT_TRUE(IsValidExcludeNode("n1"));
  EXPECT_TRUE(IsValidExcludeNode("A-z_0.9"));
  EXPECT_TRUE(IsValidExcludeNode(std::string(255, 'a')));
  EXPECT_FALSE(IsValidExcludeNode(""));
  EXPECT_FALSE(IsValidExcludeNode(std::string(256, 'a')));
  EXPECT_FALSE(IsValidExcludeNode("n[1-3]"));
  EXPECT_FALSE(IsValidExcludeNode("n1,n2"));
  EXPECT_FALSE(IsValidExcludeNode("caf\xc3\xa9"));
}

TEST(ExcludeListTest, MalformedLinesNameTheirLineNumber) {
  struct Case {
    std::string text;
    std::string error;  // a part of the message
  };
  const std::vector<Case> cases = {
      {"node=n1\nsection=compute\n", "line 2: no node= field"},
      {"node=n1\n# c\nnode=n1,n2\n", "line 3: bad node name \"n1,n2\""},
      {"node=\n", "line 1: bad node name"},
      {"node=n;rm\n", "line 1: bad node name"},
      {"node=" + std::string(256, 'x') + "\n", "line 1: bad node name"},
      {"node=n\x1b[2J\n", "line 1: bad node name \"n?[2J\""},
      {"node=n1 compute\n", "line 1: field \"compute\" is not key=value"},
      {"node=n1 relative_score=fast\n", "line 1: bad relative_score \"fast\""},
      {"node=n1 time=yesterday\n", "line 1: bad time \"yesterday\""},
      {"node=n1\nnode=n2 job=\xff\n", "line 2: not valid UTF-8"},
  };
  for (const Case& c : cases) {
    auto parsed = ParseExcludeList(c.text);
    ASSERT_FALSE(parsed.ok()) << c.text;
    EXPECT_TRUE(absl::IsInvalidArgument(parsed.status())) << parsed.status();
    EXPECT_NE(parsed.status().message().find(c.error), std::string::npos)
        << parsed.status().message() << " lacks " << c.error;
    EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos) << "not one line";
  }
}

}  // namespace
}  // namespace ddp
