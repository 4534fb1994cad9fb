#!/bin/bash
# Session 7, run 7: new defaults (heads fold on, one query head per attention block): correctness.
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
timeout 110 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestConformance$/(DecodeLayer|GatherArgmax|LinearNorm)|TestModelsGPU|TestMoEDecode' > $OUT/t.log 2>&1; echo "tests rc=$?"; grep -E "^(--- )?FAIL|panic|^ok|^PASS|normalised error .*>" $OUT/t.log | head -8; grep -c "qknorm=true" $OUT/t.log
