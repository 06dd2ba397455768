#define BOOST_TEST_MODULE config_file
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "common/config_file.hpp"
#include "rdmactor/config.hpp"

using rdmactor::detail::find_config_file;

namespace {

/// A scratch install prefix: <root>/bin and <root>/share/rdmactor.
struct prefix {
  std::string root;

  prefix() {
    char tmpl[] = "/tmp/rdmactor-config-XXXXXX";
    root = ::mkdtemp(tmpl);
    ::mkdir((root + "/bin").c_str(), 0700);
    ::mkdir((root + "/share").c_str(), 0700);
    ::mkdir((root + "/share/rdmactor").c_str(), 0700);
  }

  ~prefix() {
    std::remove(installed().c_str());
    std::remove((root + "/source.ini").c_str());
    ::rmdir((root + "/share/rdmactor").c_str());
    ::rmdir((root + "/share").c_str());
    ::rmdir((root + "/bin").c_str());
    ::rmdir(root.c_str());
  }

  std::string exe() const {
    return root + "/bin/rdmactor-demo";
  }

  std::string installed() const {
    return root + "/share/rdmactor/rdmactor.ini";
  }

  static void touch(const std::string& path) {
    std::ofstream{path} << "[rdmactor]\n";
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(config_file)

BOOST_AUTO_TEST_CASE(an_installed_program_finds_the_file_of_its_prefix) {
  prefix p;
  auto source = p.root + "/source.ini";
  prefix::touch(source);
  // Not installed yet: the source tree's file (a build-tree program).
  BOOST_TEST(find_config_file(nullptr, p.exe(), source) == source);
  prefix::touch(p.installed());
  BOOST_TEST(find_config_file(nullptr, p.exe(), source)
             == p.root + "/bin/../share/rdmactor/rdmactor.ini");
  // The environment wins, existing or not.
  BOOST_TEST(find_config_file("/elsewhere.ini", p.exe(), source)
             == "/elsewhere.ini");
  BOOST_TEST(find_config_file("", p.exe(), source)
             == p.root + "/bin/../share/rdmactor/rdmactor.ini");
}

BOOST_AUTO_TEST_CASE(nothing_found_is_an_empty_name) {
  prefix p;
  BOOST_TEST(find_config_file(nullptr, p.exe(), p.root + "/none.ini").empty());
  BOOST_TEST(find_config_file(nullptr, "", "").empty());
}

BOOST_AUTO_TEST_CASE(default_config_file_reads_the_environment) {
  ::setenv("RDMACTOR_CONFIG", "/tmp/from-env.ini", 1);
  BOOST_TEST(rdmactor::default_config_file() == "/tmp/from-env.ini");
  ::unsetenv("RDMACTOR_CONFIG");
  // A test program runs from the build tree: the source tree's file.
  auto found = rdmactor::default_config_file();
  const std::string tail = "/config/rdmactor.ini";
  BOOST_TEST(found.size() > tail.size(), found);
  BOOST_TEST(found.compare(found.size() - tail.size(), tail.size(), tail) == 0,
             found);
}

BOOST_AUTO_TEST_SUITE_END()
