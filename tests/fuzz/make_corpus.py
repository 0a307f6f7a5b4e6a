#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_tokenizer and fuzz_ckpt: well-formed
inputs for the fuzzer to mutate, and the inputs of the size bugs of issue 29
(a vocab id of 10^8 or near 2^31, shard pieces of 2^31 and 2^62 floats with
no bytes behind them, shapes whose product overflows). Run from anywhere;
the outputs are committed."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))


def put(corpus, name, data):
    os.makedirs(os.path.join(HERE, corpus), exist_ok=True)
    with open(os.path.join(HERE, corpus, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def tokenizers():
    base = json.load(open(os.path.join(TOP, "tests/fixtures/tokenizer/handmade/tokenizer.json")))
    text = json.dumps(base, ensure_ascii=False)
    put("corpus_tokenizer", "handmade.json", text)
    # the smallest that loads: two letters, no added tokens
    small = dict(base)
    small["model"] = dict(base["model"], vocab={"a": 0, "b": 1, "ab": 2}, merges=[["a", "b"]],
                          unk_token=None)
    small["added_tokens"] = []
    small["post_processor"] = None
    small["normalizer"] = None
    put("corpus_tokenizer", "small.json", json.dumps(small))
    for name, id_ in [("id_1e8", 10**8), ("id_2p31m2", 2**31 - 2), ("id_2p31", 2**31),
                      ("id_2p62", 2**62), ("id_2p64m1", 2**64 - 1), ("id_neg", -1)]:
        bad = dict(small)
        bad["model"] = dict(small["model"], vocab={"a": 0, "b": id_, "ab": 2})
        put("corpus_tokenizer", name + ".json", json.dumps(bad))
    added = dict(small)
    added["added_tokens"] = [{"id": 2**31 - 2, "content": "<x>", "single_word": False,
                              "lstrip": False, "rstrip": False, "normalized": False,
                              "special": True}]
    put("corpus_tokenizer", "added_id_2p31m2.json", json.dumps(added))


def shard(entries, data_len):
    """A shard file of the entries (kind, tensor, shape, data_offsets,
    global_shape, block_offset, block_shape, flat) and data_len bytes of
    data; a run that does not cover its block is keyed kind/tensor@start,
    as the writer names it."""
    header, meta = {}, {"format": "slurm-rl-shard-1"}
    for kind, tensor, shape, offs, glob, boff, block, flat in entries:
        whole = flat[0] == 0 and flat[1] == (block[0] * (block[1] if len(block) > 1 else 1))
        key = kind + "/" + tensor + ("" if whole else "@%d" % flat[0])
        header[key] = {"dtype": "F32", "shape": shape, "data_offsets": offs}
        meta[key] = json.dumps({"tensor": tensor, "kind": kind, "global_shape": glob,
                                "block_offset": boff, "block_shape": block, "flat": flat},
                               separators=(",", ":"))
    text = json.dumps(dict(__metadata__=meta, **header), separators=(",", ":"))
    text += " " * (-len(text) % 4)
    data = struct.pack("<f", 1.5) * (data_len // 4)
    return struct.pack("<Q", len(text)) + text.encode() + data


def ckpt():
    kinds = ["weight", "exp_avg", "exp_avg_sq"]
    # [2, 3] in two row blocks, the second split in two runs
    good = []
    for k, kind in enumerate(kinds):
        at = 24 * k
        good += [(kind, "m", [1, 3], [at, at + 12], [2, 3], [0, 0], [1, 3], [0, 3]),
                 (kind, "m@0", [2], [at + 12, at + 20], [2, 3], [1, 0], [1, 3], [0, 2]),
                 (kind, "m@2", [1], [at + 20, at + 24], [2, 3], [1, 0], [1, 3], [2, 1])]
    # the keys name where a run starts: kind/tensor@flat_start
    good = [(kind, t.split("@")[0], *rest) for kind, t, *rest in good]
    put("corpus_ckpt", "shard_good.safetensors", shard(good, 72))
    big, p62 = 2**31, 2**62
    put("corpus_ckpt", "shard_2p31.safetensors",
        shard([("weight", "w", [big], [0, 0], [big], [0], [big], [0, big])], 0))
    put("corpus_ckpt", "shard_2p62.safetensors",
        shard([(k, "w", [big, big], [0, 0], [big, big], [0, 0], [big, big], [0, p62])
               for k in kinds], 0))
    put("corpus_ckpt", "shard_shape_overflow.safetensors",
        shard([("weight", "w", [big, big, big, big], [0, 8], [2], [0], [2], [0, 2])], 8))
    put("corpus_ckpt", "shard_negative.safetensors",
        shard([("weight", "w", [2], [0, 8], [2], [0], [2], [0, -p62])], 8))
    put("corpus_ckpt", "manifest.json", json.dumps({
        "format": "slurm-rl-checkpoint-1", "step": 3, "world_size": 2, "files": [
            {"name": "rank-00000.safetensors", "bytes": 4611686018427387904,
             "xxh3_64": "0123456789abcdef"},
            {"name": "run_state.json", "bytes": 12, "xxh3_64": "fedcba9876543210"}]}, indent=1))
    put("corpus_ckpt", "run_state.json", json.dumps({
        "step": 3, "optimizer_steps": 12, "consumed_samples": 384,
        "data": {"epoch": 0, "position": 18446744073709551615 - 2**63, "examples": 7,
                 "next_problem": 0},
        "rng": {"seed": 42, "streams": "derived"},
        "model": {"signature": "crafted", "reference_xxh3_64": "0123456789abcdef"},
        "layout": {"world_size": 2147483648, "tensor": 1, "pipeline": 1, "context": 1,
                   "data": 2},
        "slurm": {"job_id": 0, "restart_count": 0},
        "metrics": {"reward_mean": 0.5}}, indent=1))


tokenizers()
ckpt()
