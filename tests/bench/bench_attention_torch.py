"""The PyTorch column of bench_attention: torch's FlashAttention SDPA backend
(bf16, causal) on the shapes bench_attention.c passes, timed with CUDA events
(warm-ups, then the median). Usage:

    bench_attention_torch.py HEAD_DIM N_HEADS TOKENS SEQ:KV_HEADS ...

Prints one line per shape,

    torch seq=S kv=KV fwd_ms=F fwdbwd_ms=FB gqa=native|repeat

or one line 'torch: unavailable: REASON' (exit status 0) when torch, its
CUDA build or a GPU is missing. gqa=repeat: this torch's flash backend took
no enable_gqa, so K and V were expanded to all query heads beforehand
(outside the timing), which moves more bytes for the same FLOPs."""

import sys

WARMUP = 3
REPS = 20


def timed(torch, fn):
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPS):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def bench_shape(torch, F, sdpa_kernel, backend, d, h, tokens, seq, kv):
    batch = tokens // seq
    dev, dt = "cuda", torch.bfloat16
    # token-major [batch, seq, heads, dim] as our kernels keep them, viewed
    # as the [batch, heads, seq, dim] SDPA wants (the last dim contiguous)
    qb = torch.randn(batch, seq, h, d, device=dev, dtype=dt, requires_grad=True)
    kb = torch.randn(batch, seq, kv, d, device=dev, dtype=dt, requires_grad=True)
    vb = torch.randn(batch, seq, kv, d, device=dev, dtype=dt, requires_grad=True)
    dout = torch.randn(batch, h, seq, d, device=dev, dtype=dt)
    q, k, v = qb.transpose(1, 2), kb.transpose(1, 2), vb.transpose(1, 2)

    def attn(k, v, **kw):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)

    mode, kw = "native", {}
    if kv != h:
        kw = {"enable_gqa": True}
        try:
            attn(k, v, **kw)
        except (TypeError, RuntimeError):
            mode, kw = "repeat", {}
            rep = h // kv
            k = k.detach().repeat_interleave(rep, dim=1).requires_grad_()
            v = v.detach().repeat_interleave(rep, dim=1).requires_grad_()

    fwd = timed(torch, lambda: attn(k, v, **kw))
    fwdbwd = timed(torch, lambda: attn(k, v, **kw).backward(dout))
    return fwd, fwdbwd, mode


def main(argv):
    d, h, tokens = int(argv[1]), int(argv[2]), int(argv[3])
    shapes = [tuple(int(x) for x in a.split(":")) for a in argv[4:]]
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # no torch, or one without torch.nn.attention
        print(f"torch: unavailable: {type(e).__name__}: {e}")
        return 0
    if not torch.cuda.is_available():
        print(f"torch: unavailable: torch {torch.__version__} sees no CUDA device")
        return 0
    for seq, kv in shapes:
        try:
            fwd, fwdbwd, mode = bench_shape(torch, F, sdpa_kernel, SDPBackend.FLASH_ATTENTION,
                                            d, h, tokens, seq, kv)
        except RuntimeError as e:
            print(f"torch seq={seq} kv={kv} failed: {str(e).splitlines()[0]}", flush=True)
            continue
        print(f"torch seq={seq} kv={kv} fwd_ms={fwd:.4f} fwdbwd_ms={fwdbwd:.4f} gqa={mode}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
