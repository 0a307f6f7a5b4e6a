"""The PyTorch column of bench_model_gpu: the same model directory and shapes
on the same GPU, eager.

Training: one step of forward, the log-probabilities of the next tokens (the
mean NLL as the loss), backward, grad-norm clip 1.0 and AdamW (fused=False),
in fp32 (TF32 off, as ours) and under bf16 autocast over the fp32 weights. A
batch that does not fit runs as micro-batches accumulated into the same step;
train_*_micro says how many sequences each took (null rate: not even one).

Generation: HF generate, greedy, with the KV cache, fp32 weights and then
bf16 weights. gen_*: batch x new / t(new); dec_*: the decode steps alone,
batch x (new - 1) / (t(new) - t(1)).

usage: bench_model_gpu_torch.py DIR N_SEQS SEQ_LEN PROMPT_LEN NEW_TOKENS
       BATCHES(1,16,64,256) TRAIN_REPS GEN_REPS [DEVICE]
Prints one JSON line; {"error": ...} when there is no CUDA device."""

import gc
import json
import os
import sys
import time

# fewer out-of-memory failures from fragmentation at the fp32 batch
os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")

import torch  # noqa: E402
import transformers  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402


def median_time(fn, reps, warmup, sync):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def train_rate(model, opt, ids, precision, reps, sync):
    n_seqs, seq_len = ids.shape
    n_targets = n_seqs * (seq_len - 1)
    device_type = ids.device.type

    def step(micro):
        opt.zero_grad(set_to_none=False)
        for i in range(0, n_seqs, micro):
            x = ids[i:i + micro]
            with torch.autocast(device_type, dtype=torch.bfloat16,
                                enabled=precision == "bf16"):
                logits = model(input_ids=x).logits[:, :-1]
            lp = torch.log_softmax(logits.float(), -1).gather(-1, x[:, 1:, None])
            (-lp.sum() / n_targets).backward()
            del logits, lp
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    micro = n_seqs
    while micro >= 1:
        try:
            t = median_time(lambda: step(micro), reps, 2, sync)
            return n_seqs * seq_len / t, micro
        except torch.cuda.OutOfMemoryError:
            pass
        # the exception's frames are gone: their tensors can go back
        gc.collect()
        torch.cuda.empty_cache()
        micro //= 2
    return None, 0


def gen_rates(model, prompts, batches, new_tokens, reps, sync, precision, out):
    for b in batches:
        p = prompts[:b]
        mask = torch.ones_like(p)

        def gen(n):
            with torch.no_grad():
                model.generate(input_ids=p, attention_mask=mask, do_sample=False,
                               max_new_tokens=n, min_new_tokens=n, pad_token_id=0,
                               use_cache=True)

        t_full = median_time(lambda: gen(new_tokens), reps, 1, sync)
        t_one = median_time(lambda: gen(1), reps, 1, sync)
        out[f"gen_{precision}_b{b}_tok_s"] = b * new_tokens / t_full
        out[f"dec_{precision}_b{b}_tok_s"] = (b * (new_tokens - 1) / (t_full - t_one)
                                              if t_full > t_one else None)


def main(model_dir, n_seqs, seq_len, prompt_len, new_tokens, batches, train_reps, gen_reps,
         device_name=None):
    if device_name is None:
        if not torch.cuda.is_available():
            print(json.dumps({"error": "torch.cuda.is_available() is False"}))
            return
        device_name = "cuda"
    device = torch.device(device_name)
    cuda = device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    torch.set_float32_matmul_precision("highest")  # fp32 products, no TF32
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name(device) if cuda else device_name,
           "torch": torch.__version__, "transformers": transformers.__version__}

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="sdpa").to(device)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (n_seqs, seq_len), device=device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=0.01, fused=False)
    for precision in ("fp32", "bf16"):
        rate, micro = train_rate(model, opt, ids, precision, train_reps, sync)
        out[f"train_{precision}_tok_s"] = rate
        out[f"train_{precision}_micro"] = micro

    del opt, ids
    model.zero_grad(set_to_none=True)
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    model.eval()
    prompts = torch.randint(0, vocab, (max(batches), prompt_len), device=device)
    gen_rates(model, prompts, batches, new_tokens, gen_reps, sync, "fp32", out)
    model.to(torch.bfloat16)
    gen_rates(model, prompts, batches, new_tokens, gen_reps, sync, "bf16", out)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    a = sys.argv
    main(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]),
         [int(b) for b in a[6].split(",")], int(a[7]), int(a[8]),
         a[9] if len(a) > 9 else None)
