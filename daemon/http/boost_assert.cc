// Boost's assertion handler (BOOST_ENABLE_ASSERT_DEBUG_HANDLER, set by
// //daemon/http:boost for every target that uses Boost): in builds without
// NDEBUG, a failed BOOST_ASSERT comes here and aborts as assert() would,
// except for one check in Boost 1.74's Beast that is wrong: the chunked
// request parser asserts that a chunk header has at least 5 bytes where 3
// ("0\r\n" before the final CRLF) are legal and the code after it asks for
// more (Beast PR #2861, fixed in Boost 1.86). A client could otherwise abort
// a debug build of the daemon with such a request; the HTTP fuzzer found it.
// Builds with NDEBUG (--config=opt) compile every BOOST_ASSERT out.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace boost {
namespace {

bool KnownWrong(const char* expr, const char* file) {
  return std::strcmp(expr, "n >= 5") == 0 &&
         std::string_view(file).ends_with("boost/beast/http/impl/basic_parser.ipp");
}

}  // namespace

void assertion_failed_msg(const char* expr, const char* msg, const char* function, const char* file,
                          long line) {
  if (KnownWrong(expr, file)) return;
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion `%s' failed%s%s\n", file, line, function, expr,
               msg != nullptr ? ": " : "", msg != nullptr ? msg : "");
  std::abort();
}

void assertion_failed(const char* expr, const char* function, const char* file, long line) {
  assertion_failed_msg(expr, nullptr, function, file, line);
}

}  // namespace boost
