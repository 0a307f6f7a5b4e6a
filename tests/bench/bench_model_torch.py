"""The PyTorch column of `make bench`: the same model directory, the same
batch shapes and thread count as bench_model.c, fp32 on the CPU. Prints one
JSON line: train_tok_s, gen_tok_s."""

import json
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def timed(fn, min_seconds=2.0):
    fn()  # warm-up
    reps, t0 = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        t = time.perf_counter() - t0
        if t >= min_seconds:
            return t / reps


def main(model_dir, threads, n_seqs, seq_len, n_prompts, prompt_len, new_tokens):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="sdpa")
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (n_seqs, seq_len))

    def train_step():
        model.zero_grad(set_to_none=False)
        logits = model(input_ids=ids).logits[:, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])
        (-lp.mean()).backward()

    t_train = timed(train_step)
    prompts = torch.randint(0, vocab, (n_prompts, prompt_len))

    @torch.no_grad()
    def gen():
        model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts),
                       do_sample=False, max_new_tokens=new_tokens,
                       min_new_tokens=new_tokens, pad_token_id=0)

    t_gen = timed(gen)
    print(json.dumps({"train_tok_s": n_seqs * seq_len / t_train,
                      "gen_tok_s": n_prompts * new_tokens / t_gen}))


if __name__ == "__main__":
    main(sys.argv[1], *map(int, sys.argv[2:8]))
