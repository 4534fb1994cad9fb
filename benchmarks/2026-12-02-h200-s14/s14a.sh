# s14a: first GPU call of the three branches merged (s14-fp8kv, s14-moegroup, s14-sampling; branch s14-all).
# Correctness only: host-side kernel/launch checks, conformance (with the fp8 KV cases, the MoE rows variants,
# SampleRows), MoE path tests, device sampling, the KV free, then the fixtures on CUDA (f16 and fp8 KV) and the
# engine tests (row sampling = host sampling, batch invariance).
# Predictions: everything passes (notes/cuda-session-14.md; notes/moe-rows.md is on branch s14-moegroup).
set -u
for f in .gpu/mlxcel .gpu/cuda.test; do gunzip -kf $f.gz; chmod +x $f; done
export MLXCEL_TESTDATA=$PWD/.gpu/testdata MLXCEL_CUDA_CACHE=/tmp/kc
S=$(date +%s)
timeout 330 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestKernel|TestLaunch|TestKV|TestLibrary|TestSmoke|TestConformance$|TestConformanceKVFP8|TestConformanceVariants/(ticketmerge|notile|notileticket|nomoerows|moerows2|moerows32pe)|TestGraphReplay|TestMoEPrefill$|TestMoERowsRepeat$|TestMoEDecode$|TestRecordMoERows|TestSample|TestFreeKVStoreGPU' > $OUT/t1.log 2>&1; echo "t1 rc=$? $(( $(date +%s)-S )) s"
timeout 200 .gpu/cuda.test -test.count=1 -test.v -test.run 'TestModelsGPU|TestKVFP8ModelsGPU|TestEngine' > $OUT/t2.log 2>&1; echo "t2 rc=$? $(( $(date +%s)-S )) s"
for l in t1 t2; do echo "== $l"; grep -E "^(--- FAIL|FAIL|ok|PASS|panic)|^    --- FAIL|^        --- FAIL|^            --- FAIL" $OUT/$l.log | head -40; echo "passes: $(grep -c -- '--- PASS' $OUT/$l.log)"; done
grep -E "^--- (PASS|FAIL).*\([0-9.]+s\)" $OUT/t1.log $OUT/t2.log | awk '{print $2, $3, $4}' | sort -t'(' -k2 -rn | head -12
cd $OUT && tar czf logs.tgz *.log && rm -f *.log
