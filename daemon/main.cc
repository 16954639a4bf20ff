// wasted: the waste daemon and its offline tools. Parses the subcommand and
// hands over; the subcommands live in their own modules.
#include <iostream>
#include <string>
#include <vector>

#include "daemon/bench/commands.h"
#include "daemon/bench_io_command.h"
#include "daemon/quality/imatrix_collector.h"
#include "daemon/quality/perplexity.h"
#include "daemon/quality/quantize_model.h"
#include "daemon/serve.h"
#include "daemon/service/version.h"
#include "daemon/tools/inspect.h"
#include "daemon/tools/mkmodel.h"

namespace {

constexpr char kUsage[] = R"(usage: wasted <command> [flags]

commands:
  serve      run the daemon (see wasted serve --help)
  inspect    describe a GGUF model: shapes, bytes by part and layer (--json)
  mkmodel    write a synthetic GGUF model (see wasted mkmodel --help)
  bench-io   this disk's read bandwidth through waste's reader
  plan       the memory plan of a model for a RAM budget (wasted plan --help)
  bench      prefill/decode speed under a RAM budget (wasted bench --help)
  quantize   rewrite a GGUF model's matrices in another type (q4_k, q2_k, iq2_xxs, ...),
             optionally weighted by an importance matrix (--imatrix)
  imatrix    a model's importance matrix on a calibration text (llama.cpp's format)
  perplexity a model's perplexity on a text file, comparable with llama-perplexity
  version    print the version
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << kUsage;
    return 2;
  }
  std::string command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "serve") return waste::RunServe(args);
  if (command == "bench-io") return waste::RunBenchIoCommand(args);
  if (command == "plan") return waste::bench::RunPlan(args);
  if (command == "bench") return waste::bench::RunBench(args);
  if (command == "inspect") return waste::tools::RunInspect(args);
  if (command == "mkmodel") return waste::tools::RunMkModel(args);
  if (command == "quantize") return waste::quality::RunQuantize(args);
  if (command == "imatrix") return waste::quality::RunImatrix(args);
  if (command == "perplexity") return waste::quality::RunPerplexity(args);
  if (command == "version" || command == "--version") {
    std::cout << "wasted " << waste::kWasteVersion << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    std::cout << kUsage;
    return 0;
  }
  std::cerr << "wasted: unknown command '" << command << "'\n\n" << kUsage;
  return 2;
}
