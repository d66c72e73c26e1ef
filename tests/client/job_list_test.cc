// ddpctl ls's sources (client/ddpctl/job_list.h) without Slurm or a coordinator: squeue/sacct
// lines (the kit's Comment record after a user's comment, "(null)", the <WorkDir>/dist_file.<id>
// fallback, sacct's "CANCELLED by N", array ids, lines that are not ours), which files of a
// folder are jobs, and what a job whose coordinator is gone shows (result file, stale dist_file)
// within the deadline. Live coordinators: tests/client/ddpctl_ls_test.sh.
#include "client/ddpctl/job_list.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/dist_file.h"
#include "common/file_util.h"
#include "gtest/gtest.h"

namespace ddp {
namespace {

class JobListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/job_list_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { (void)std::system(("rm -rf '" + dir_ + "'").c_str()); }

  // A dist_file of `job` naming a coordinator nobody listens on.
  void WriteDistFile(const std::string& name, const std::string& job) {
    auto c = NewDistFileContents(job, 0, "127.0.0.1:1", 0);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(PublishDistFile(Path(name), *c).ok());
  }
  void WriteResult(const std::string& name, const std::string& job, const std::string& state,
                   int exit_code) {
    ASSERT_TRUE(WriteFileAtomically(Path(name),
                                    absl::StrCat("job_id=", job, "\ngeneration=0\nstate=", state,
                                                 "\nexit_code=", exit_code, "\n"),
                                    0600)
                    .ok());
  }
  void WriteText(const std::string& name, const std::string& text, mode_t mode = 0600) {
    ASSERT_TRUE(WriteFileAtomically(Path(name), text, mode).ok());
  }
  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  std::string dir_;
};

// One squeue line of SqueueFormat()'s fields.
std::string Line(const std::vector<std::string>& fields) {
  std::string line;
  for (size_t i = 0; i < fields.size(); ++i) absl::StrAppend(&line, i ? "\x1f" : "", fields[i]);
  return line + "\n";
}

TEST_F(JobListTest, SqueueFormatHasSixFields) {
  EXPECT_EQ(SqueueFormat(), "%A\x1f%i\x1f%T\x1f%Z\x1f%j\x1f%k");
}

TEST_F(JobListTest, ParsesSlurmLines) {
  WriteDistFile("dist_file.12", "12");
  const std::string text =
      Line({"11", "11", "RUNNING", "/nowhere", "a", "lr sweep ddp:dist_file=/runs/my dir/df.11"}) +
      Line({"12", "12", "RUNNING", dir_, "b", "(null)"}) +  // the kit's default path is there
      Line({"13", "13", "PENDING", dir_, "c", "(null)"}) +  // nothing at the default path
      Line({"14", "10_4", "CANCELLED by 1000", "/nowhere", "d", ""}) +  // sacct
      "squeue: warning: something\n" + Line({"15", "15", "COMPLETED", "(null)", "e"});
  const std::vector<JobRef> jobs = ParseSlurmJobs(text);
  ASSERT_EQ(jobs.size(), 5u);
  EXPECT_EQ(jobs[0].job_id, "11");
  EXPECT_EQ(jobs[0].raw_job_id, "11");
  EXPECT_EQ(jobs[0].name, "a");
  EXPECT_EQ(jobs[0].slurm_state, "RUNNING");
  EXPECT_EQ(jobs[0].dist_file, "/runs/my dir/df.11");
  EXPECT_EQ(jobs[1].dist_file, Path("dist_file.12"));
  EXPECT_EQ(jobs[2].dist_file, "");
  EXPECT_EQ(jobs[3].job_id, "10_4");
  EXPECT_EQ(jobs[3].raw_job_id, "14");
  EXPECT_EQ(jobs[3].slurm_state, "CANCELLED");
  EXPECT_EQ(jobs[4].job_id, "15");
  EXPECT_EQ(jobs[4].dist_file, "");
  for (const JobRef& j : jobs) EXPECT_FALSE(j.dist_file_only);
}

TEST_F(JobListTest, FolderJobsPicksTheJobFiles) {
  WriteDistFile("dist_file.1", "1");
  WriteText("dist_file.1.lock", "job 1\n");
  WriteText("dist_file.1.exclude", "node=n1\n");
  WriteText("dist_file.1.journal", "binary");
  WriteResult("dist_file.1.result", "1", "FAILED", 1);     // beside a dist_file: not a row
  WriteResult("dist_file.2.result", "2", "SUCCEEDED", 0);  // a finished job
  WriteText("dist_file.3.result", "garbage\n");            // names no outcome: not a job
  WriteDistFile("job-four.df", "4");                       // another name that reads as one
  WriteText("dist_file.bad", "not a dist file\n");         // named like one: listed, unreadable
  WriteText("notes.txt", "hello\n");                       // neither
  WriteText("dist_file.5.tmp.123.0.0.host", "partial");    // a writer's temp file
  auto jobs = FolderJobs(dir_);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  std::vector<std::string> names;
  for (const JobRef& j : *jobs) names.push_back(j.name);
  EXPECT_EQ(names, (std::vector<std::string>{"dist_file.1", "dist_file.2", "dist_file.bad",
                                             "job-four.df"}));
  EXPECT_EQ((*jobs)[0].job_id, "1");
  EXPECT_EQ((*jobs)[1].dist_file, Path("dist_file.2"));
  EXPECT_EQ((*jobs)[3].job_id, "4");
  for (const JobRef& j : *jobs) EXPECT_TRUE(j.dist_file_only);
  EXPECT_TRUE(absl::IsNotFound(FolderJobs(Path("missing")).status()));
}

TEST_F(JobListTest, JobsWithoutACoordinator) {
  WriteResult("dist_file.2.result", "2", "SUCCEEDED", 0);
  WriteDistFile("dist_file.3", "3");  // its coordinator is gone
  WriteText("dist_file.bad", "not a dist file\n");
  WriteDistFile("dist_file.6", "6");  // Slurm's job 7 recorded this path: another job's file
  WriteResult("dist_file.8.result", "999", "FAILED", 1);  // another job's result
  WriteDistFile("dist_file.9", "9");
  ASSERT_EQ(::chmod(Path("dist_file.9").c_str(), 0644), 0);  // not private: not trusted
  auto folder = FolderJobs(dir_);
  ASSERT_TRUE(folder.ok()) << folder.status();
  std::vector<JobRef> refs = *folder;
  JobRef slurm;
  slurm.job_id = slurm.raw_job_id = "7";
  slurm.slurm_state = "RUNNING";
  slurm.dist_file = Path("dist_file.6");
  refs.push_back(slurm);
  slurm.job_id = slurm.raw_job_id = "8";
  slurm.slurm_state = "COMPLETED";
  slurm.dist_file = Path("dist_file.8");
  refs.push_back(slurm);
  slurm.job_id = slurm.raw_job_id = "10";
  slurm.slurm_state = "PENDING";
  slurm.dist_file = "";
  refs.push_back(slurm);
  const absl::Time start = absl::Now();
  const std::vector<JobRow> rows = InspectJobs(refs, absl::Seconds(1), 16);
  EXPECT_LT(absl::Now() - start, absl::Seconds(4)) << "the deadline is per job, in parallel";
  // The folder's rows by file name (dist_file.2.result, .3, .6, .8.result, .9, .bad), then
  // Slurm's.
  struct Want {
    std::string job_id, state, source;
    bool error;
  };
  const std::vector<Want> want = {
      {"2", "SUCCEEDED", "result", false},  // only its result is left
      {"3", "UNREACHABLE", "none", true},   // a stale dist_file
      {"6", "UNREACHABLE", "none", true},
      {"999", "FAILED", "result", false},  // in a folder, a result speaks for its own job
      {"", "UNREADABLE", "none", true},    // mode 0644
      {"", "UNREADABLE", "none", true},    // garbage
      {"7", "RUNNING", "slurm", true},     // job 6's dist_file
      {"8", "COMPLETED", "slurm", false},  // job 999's result: not job 8's
      {"10", "PENDING", "slurm", false},   // no dist_file known
  };
  ASSERT_EQ(rows.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("row ", i, " ", rows[i].ref.name));
    EXPECT_EQ(rows[i].ref.job_id, want[i].job_id);
    EXPECT_EQ(rows[i].state, want[i].state);
    EXPECT_EQ(rows[i].state_source, want[i].source);
    EXPECT_EQ(!rows[i].error.empty(), want[i].error) << rows[i].error;
    EXPECT_FALSE(rows[i].have_status);
  }
  EXPECT_EQ(rows[0].result_exit_code, 0);
  EXPECT_EQ(rows[3].result_exit_code, 1);
  EXPECT_NE(rows[4].error.find("mode"), std::string::npos) << rows[4].error;
  EXPECT_NE(rows[6].error.find("belongs to job 6"), std::string::npos) << rows[6].error;
  EXPECT_TRUE(rows[6].dist_file_unreadable);
}

}  // namespace
}  // namespace ddp
