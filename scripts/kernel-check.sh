#!/bin/bash
# kernel-check.sh: compile the embedded CUDA kernels for sm_90a on a machine
# without a GPU and print ptxas's report (errors, registers, spills). It
# needs an nvcc; on Debian bookworm the non-free packages can be unpacked
# without installing the driver:
#   apt-get download nvidia-cuda-toolkit nvidia-cuda-dev libnvvm4
#   for f in *.deb; do dpkg -x $f /opt/cu; done
# CUDA_ROOT points at the unpacked tree (default /opt/cu). The sources are
# concatenated in the order of kernels/kernels.go: one program of every
# kernel, the same code the backend compiles as the parallel programs of
# kernels.Programs (TestKernelProgramsCompile compiles those with NVRTC).
# Usage: scripts/kernel-check.sh [regex of kernel names to list]
set -u
root=${CUDA_ROOT:-/opt/cu}
export PATH=$root/usr/lib/nvidia-cuda-toolkit/bin:$root/usr/bin:$PATH
dir=$(cd "$(dirname "$0")/../internal/backend/cuda" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf $tmp' EXIT
files=$(grep -o 'order = \[\]string{[^}]*}' "$dir/kernels/kernels.go" | grep -o '"[a-z_0-9]*\.cu"' | tr -d '"')
for f in $files; do cat "$dir/kernels/$f"; echo; done >"$tmp/all.cu"
nvcc -ccbin "${CXX:-/usr/bin/g++}" -I"$root/usr/include" -cubin -arch=sm_90a --std=c++17 \
    -allow-unsupported-compiler -Xptxas -v "$tmp/all.cu" -o "$tmp/all.cubin" >"$tmp/log" 2>&1
rc=$?
grep -E 'error|warning' "$tmp/log" | head -40
# one line per kernel: name, registers, spill bytes
awk '/Compiling entry function/ {fn=$0; sub(/.*function ./,"",fn); sub(/. for .*/,"",fn)}
     /bytes stack frame/ {match($0,/[0-9]+ bytes spill stores/); sp=substr($0,RSTART,RLENGTH); sub(/ bytes spill stores/,"",sp)}
     /Used [0-9]+ registers/ {match($0,/Used [0-9]+ registers/); r=substr($0,RSTART+5,RLENGTH-15); print fn, r " regs", sp " spill"}' \
    "$tmp/log" | grep -E "${1:-.}" | sort
exit $rc
