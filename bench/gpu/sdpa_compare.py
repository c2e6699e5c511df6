#!/usr/bin/env python3
"""Times torch.nn.functional.scaled_dot_product_attention on the inputs gpu_check used, side by side with
regatta's GPU kernel, and checks that both give the same attention output.

    sdpa_compare.py DUMP_DIR TIMING_CSV OUT_MD

DUMP_DIR holds n<N>_{q,k,v}.f32 and n<N>_out_<mask>.f32 (float32, row-major, d = e = 64), TIMING_CSV the rows
n,mask,dtype,kernel_ms,end_to_end_ms,cpu_ms written by gpu_check. Writes a markdown section to OUT_MD. When
numpy, torch or a CUDA device is missing it writes why instead and exits 0: the timing is optional, the
correctness check (gpu_check) is not.
"""
import csv
import math
import os
import sys

DIM = 64
WARMUP = 3
REPETITIONS = 10


def write(path, lines):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def main():
    dump_dir, timing_csv, out_md = sys.argv[1:4]
    header = ["## Timing against PyTorch scaled_dot_product_attention", ""]
    try:
        import numpy as np
        import torch
        import torch.nn.functional as F
    except Exception as error:  # noqa: BLE001 - any import failure means: no comparison
        write(out_md, header + [f"Skipped: cannot import numpy/torch with {sys.executable} ({error})."])
        return 0
    if not torch.cuda.is_available():
        write(out_md, header + [f"Skipped: torch {torch.__version__} sees no CUDA device."])
        return 0

    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    with open(timing_csv, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))

    lines = header + [
        f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; q, k, v of shape (1, 1, n, {DIM}) are the "
        f"very inputs of the correctness table (dot score, scale 1/√{DIM}); mean of {REPETITIONS} runs after "
        f"{WARMUP} warm-ups, CUDA events, inputs already on the device. regatta kernel = its kernel alone; "
        "end-to-end = cuda::reduce with allocation and host↔device copies. ratio = regatta kernel / SDPA.",
        "",
        "| n = m | mask | dtype | regatta kernel ms | regatta end-to-end ms | SDPA ms | ratio | max abs Δout vs SDPA |",
        "|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        n, mask, dtype = int(row["n"]), row["mask"], row["dtype"]
        torch_dtype = torch.float32 if dtype == "float32" else torch.float64

        def load(name, rows_, cols_):
            path = os.path.join(dump_dir, f"n{n}_{name}.f32")
            return np.fromfile(path, dtype=np.float32).reshape(rows_, cols_)

        q, k, v = (torch.from_numpy(load(name, n, DIM)).to(device=device, dtype=torch_dtype).view(1, 1, n, DIM)
                   for name in ("q", "k", "v"))
        causal = mask == "causal"

        def attend():
            return F.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(DIM), is_causal=causal)

        try:
            for _ in range(WARMUP):
                result = attend()
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(REPETITIONS):
                result = attend()
            stop.record()
            torch.cuda.synchronize()
            sdpa_ms = start.elapsed_time(stop) / REPETITIONS
        except Exception as error:  # noqa: BLE001 - report and go on with the other rows
            lines.append(f"| {n} | {mask} | {dtype} | {float(row['kernel_ms']):.3f} | "
                         f"{float(row['end_to_end_ms']):.3f} | failed: {error} | — | — |")
            continue
        difference = "—"
        if dtype == "float32":
            ours = torch.from_numpy(load(f"out_{mask}", n, DIM)).to(device)
            difference = f"{(result.view(n, DIM).float() - ours).abs().max().item():.2e}"
        kernel_ms = float(row["kernel_ms"])
        lines.append(f"| {n} | {mask} | {dtype} | {kernel_ms:.3f} | {float(row['end_to_end_ms']):.3f} | "
                     f"{sdpa_ms:.3f} | {kernel_ms / sdpa_ms:.1f}× | {difference} |")
    write(out_md, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
