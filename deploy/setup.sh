#!/usr/bin/env bash
# Installs exactly the Debian 12 packages waste needs to build, test and run.
# Idempotent: packages already installed are left alone. Uses sudo when not
# root. (--fuzz is accepted and changes nothing: the fuzz stage's clang is
# in the list now.)
set -euo pipefail

packages=(
  g++ pkg-config bazel-bootstrap
  protobuf-compiler protobuf-compiler-grpc libprotobuf-dev libgrpc++-dev
  libabsl-dev libboost-dev libboost-system-dev libgtest-dev libgmock-dev
  liburing-dev libpcre2-dev libicu-dev libtomlplusplus-dev nlohmann-json3-dev
  # promtool, which checks the HTTP face's /metrics page in tests. The
  # package also ships the Prometheus server, whose unit Debian enables.
  prometheus
  # The fuzz stage of deploy/test.sh: clang with libFuzzer and the
  # sanitizer runtimes, and make for tests/fuzz/run_fuzzer.sh.
  clang libclang-rt-14-dev make
)

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
