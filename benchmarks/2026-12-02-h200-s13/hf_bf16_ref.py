# How far HF transformers' own bf16 forward on the GPU lands from the f32 CPU references of the tiny
# fixtures (the same max|diff|/max|ref| of the full-sequence logits that TestModelsGPU bounds), to tell a
# precision floor of bf16 prefill from a bug. Usage: python3 hf_bf16_ref.py TESTDATA_DIR FIXTURE...
import sys, torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

root = sys.argv[1]
print("fixture,dtype,device,full_rel,argmax_agree")
for fx in sys.argv[2:]:
    ref = load_file(f"{root}/{fx}/reference.safetensors")
    ids = ref["input_ids"].long().unsqueeze(0)
    want = ref["logits"].float()
    for dt, dev in ((torch.float32, "cuda"), (torch.bfloat16, "cuda")):
        try:
            m = AutoModelForCausalLM.from_pretrained(f"{root}/{fx}", dtype=dt).to(dev).eval()
            with torch.no_grad():
                got = m(ids.to(dev), use_cache=False).logits[0].float().cpu()
            rel = (got - want).abs().max().item() / want.abs().max().item()
            agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
            print(f"{fx},{str(dt).split('.')[-1]},{dev},{rel:.4g},{agree:.3f}")
        except Exception as e:  # a family this transformers does not know
            print(f"{fx},{str(dt).split('.')[-1]},{dev},error,{type(e).__name__}: {str(e)[:80]}")
