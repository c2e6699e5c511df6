#!/usr/bin/env bash
# Installs the Debian 12 packages regatta needs, and only those that are missing (idempotent).
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libeigen3-dev libboost-dev libgmp-dev libmpfr-dev libmpfi-dev
  libcli11-dev nlohmann-json3-dev libzip-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  gnuplot-nox chromium  # chromium (headless): scripts/check_report_page.py loads the report page
  openmpi-bin libopenmpi-dev
  clang libclang-rt-14-dev libomp-dev
  pybind11-dev python3-dev python3-numpy python3-pytest python3-torch python3-pot python3-tqdm
  libonnx-dev libprotobuf-dev python3-onnx python3-torchvision  # torchvision: the ViT of the ONNX and Python tests
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
echo "install-deps: installing ${missing[*]}"
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
