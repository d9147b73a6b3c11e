#!/usr/bin/env python3
"""The transformer language model of tools/bench/lm_bench.cc in PyTorch.

Same architecture (token and learned position embeddings, pre-norm causal
blocks of LayerNorm(eps 1e-3), q/k/v/output projections with 1/sqrt(key_dim)
scaling and a -1e9 causal mask, a ReLU feed-forward of 4x width, a final
LayerNorm and logits), cross-entropy over every position, Adam(1e-3), a
fixed random batch, torch.set_num_threads(threads); the median round's
training tokens/s.

  python3 tools/bench/lm_torch.py --threads=1 --json
"""
import argparse
import json
import math
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("threads", 1), ("batch", 16), ("seq", 64), ("width", 128), ("heads", 4),
                          ("blocks", 2), ("vocab", 96), ("steps", 20), ("warmup", 3), ("rounds", 3)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--device", default="cpu")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    W, S, V, H = a.width, a.seq, a.vocab, a.heads
    dk = W // H

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(W, eps=1e-3)
            self.q, self.k, self.v, self.o = (torch.nn.Linear(W, W) for _ in range(4))
            self.ln2 = torch.nn.LayerNorm(W, eps=1e-3)
            self.ff1, self.ff2 = torch.nn.Linear(W, 4 * W), torch.nn.Linear(4 * W, W)
            self.register_buffer("mask", torch.triu(torch.full((S, S), -1e9), diagonal=1))

        def forward(self, h):
            b = h.shape[0]
            n = self.ln1(h)
            q, k, v = (f(n).view(b, S, H, dk).transpose(1, 2) for f in (self.q, self.k, self.v))
            scores = (q / math.sqrt(dk)) @ k.transpose(-1, -2) + self.mask
            ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, S, W)
            h = h + self.o(ctx)
            return h + self.ff2(F.relu(self.ff1(self.ln2(h))))

    class Lm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = torch.nn.Embedding(V, W)
            self.positions = torch.nn.Parameter(torch.randn(S, W) * 0.1)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(a.blocks))
            self.norm = torch.nn.LayerNorm(W, eps=1e-3)
            self.logits = torch.nn.Linear(W, V)

        def forward(self, ids):
            h = self.tokens(ids) + self.positions
            for blk in self.blocks:
                h = blk(h)
            return self.logits(self.norm(h))

    model = Lm().to(a.device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, V, (a.batch, S), generator=g).to(a.device)
    y = torch.randint(0, V, (a.batch * S,), generator=g).to(a.device)

    def step():
        loss = F.cross_entropy(model(x).reshape(-1, V), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    first = float(step())
    for _ in range(a.warmup - 1):
        step()
    sync()
    rates = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        sync()
        rates.append(a.steps * a.batch * S / (time.perf_counter() - t0))
    rates.sort()
    res = {"framework": "torch", "version": torch.__version__, "device": a.device, "threads": a.threads,
           "batch": a.batch, "seq": S, "width": W, "blocks": a.blocks, "tokens_per_sec": rates[len(rates) // 2],
           "loss_first": first, "loss_last": float(loss)}
    if a.json:
        print(json.dumps(res))
    else:
        print(f"torch {torch.__version__} transformer LM on {a.device}, {a.threads} thread(s): "
              f"{res['tokens_per_sec']:.0f} tokens/s; loss {first:.4f} -> {res['loss_last']:.4f}")


if __name__ == "__main__":
    main()
