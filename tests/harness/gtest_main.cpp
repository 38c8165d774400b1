// The main of every GoogleTest program in tests/ (gtest_dep links it).
// gtest's own main exits 0 when every test skipped, and meson then counts a
// program that checked nothing as a pass. Here:
//   some test failed                  -> 1 (gtest's own verdict)
//   no test ran (a filter that matches nothing) -> 1: nothing was checked
//   every test that ran was skipped   -> 77, meson's SKIP
//   otherwise                         -> 0
#include <gtest/gtest.h>

#include <cstdio>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  // Listing tests (or printing help) runs none: keep gtest's answer.
  if (GTEST_FLAG_GET(list_tests) || rc != 0) return rc;
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  int ran = u.test_to_run_count(), skipped = u.skipped_test_count();
  if (ran == 0) {
    fprintf(stderr, "gtest_main: no test ran (filter '%s' matches none): nothing was checked\n",
            GTEST_FLAG_GET(filter).c_str());
    return 1;
  }
  if (u.failed_test_count() == 0 && skipped == ran) {
    printf("gtest_main: all %d test(s) that ran were skipped: exit 77 (SKIP)\n", ran);
    return 77;
  }
  return rc;
}
