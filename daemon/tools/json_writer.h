// A minimal streaming JSON writer for the tools' --json output: objects,
// arrays, strings (escaped per RFC 8259), integers, doubles and booleans,
// indented two spaces. The caller nests Begin/End calls correctly and puts
// a Key before each value inside an object (CHECKed).
#ifndef WASTE_DAEMON_TOOLS_JSON_WRITER_H_
#define WASTE_DAEMON_TOOLS_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace waste::tools {

class JsonWriter {
 public:
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  void String(std::string_view value);
  void Int(int64_t value);
  void Uint(uint64_t value);
  void Double(double value);  // Non-finite values are written as null.
  void Bool(bool value);
  void Null();

  // The document so far; complete once every Begin has its End.
  const std::string& str() const { return out_; }

 private:
  struct Level {
    bool object = false;
    bool empty = true;
    bool key_pending = false;
  };
  void BeforeValue();
  void Close(bool object, char bracket);
  void Newline();
  void AppendEscaped(std::string_view s);

  std::string out_;
  std::vector<Level> stack_;
};

}  // namespace waste::tools

#endif  // WASTE_DAEMON_TOOLS_JSON_WRITER_H_
