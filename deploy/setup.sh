#!/usr/bin/env bash
# Installs exactly the Debian 12 packages waste needs to build, test and run.
# Idempotent: packages already installed are left alone. Uses sudo when not
# root. Pass --fuzz to also install clang for tests/fuzz/run_gguf_fuzzer.sh.
set -euo pipefail

packages=(
  g++ pkg-config bazel-bootstrap
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libboost-dev libboost-system-dev libgtest-dev libgmock-dev
  liburing-dev libpcre2-dev libicu-dev libtomlplusplus-dev nlohmann-json3-dev
  # promtool, which checks the HTTP face's /metrics page in tests. The
  # package also ships the Prometheus server, whose unit Debian enables.
  prometheus
)
if [[ "${1:-}" == "--fuzz" ]]; then
  packages+=(clang libclang-rt-14-dev)
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
