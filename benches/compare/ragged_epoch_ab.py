"""tensorfit's epoch time in both batch orders, for one or more binaries timed in turns
(issue 30: the shuffled epoch over the length-grouped one; ragged_convergence.sh's
tensorfit figure is its run's seconds over 8 epochs, too coarse to resolve 10% here).

Per round, each binary trains in each order (`train --batch 16 --lr 0.01 --seed
1 + round % 3 --device cpu --json`, RAYON_NUM_THREADS=THREADS, default 2); a run's figure
is the median of its epochs' times (differences of the cumulative `seconds` of each
epoch's JSON line, the epoch's validation included). Prints each round, then per binary
the medians over rounds and their ratio.

    python3 benches/compare/ragged.py make --out /tmp/rg --seed 0
    python3 benches/compare/ragged_epoch_ab.py --data /tmp/rg --model MODEL.toml \\
        --rounds 11 --epochs 60 BEFORE/tensorfit target/release/tensorfit

MODEL.toml: ragged_convergence.sh's model (LSTM 32, 1 layer, output on the last step).
With `--torch PYTHON`, PyTorch trains the same task in the same orders in each round too
(ragged.py train: the same LSTM 32, pack_padded_sequence, batch 16, Adam 0.01; its epoch
time without validation), so both systems' ratios come from one interleaved run.
"""
import argparse
import json
import os
import statistics
import subprocess

ORDERS = ["shuffled", "length-grouped"]


def epoch_seconds(binary, a, order, seed):
    env = dict(os.environ, RAYON_NUM_THREADS=os.environ.get("THREADS", "2"))
    out = subprocess.run(
        [binary, "train", "--model", a.model, "--data", os.path.join(a.data, "train.npz"),
         "--val", os.path.join(a.data, "val.npz"), "--batch-order", order,
         "--epochs", str(a.epochs), "--batch", "16", "--lr", "0.01", "--seed", str(seed),
         "--device", "cpu", "--json"],
        capture_output=True, text=True, env=env, check=True).stdout
    lines = [json.loads(x) for x in out.strip().splitlines() if x.startswith("{")]
    ends = [x["seconds"] for x in lines if "epoch" in x]
    return statistics.median(b - e for e, b in zip([0.0] + ends, ends))


def torch_epoch_seconds(python, a, order, seed):
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run(
        [python, os.path.join(here, "ragged.py"), "train", "--data", a.data, "--seed",
         str(seed), "--order", order, "--epochs", str(a.epochs), "--threads",
         os.environ.get("THREADS", "2")],
        capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["epoch_seconds"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--torch", metavar="PYTHON", help="also time PyTorch with this Python")
    p.add_argument("--data", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--epochs", type=int, default=60)
    p.add_argument("binaries", nargs="+")
    a = p.parse_args()
    systems = a.binaries + (["pytorch"] if a.torch else [])
    res = {(b, o): [] for b in systems for o in ORDERS}
    for r in range(a.rounds):
        for b in systems:
            for o in ORDERS:
                seed = 1 + r % 3
                res[b, o].append(torch_epoch_seconds(a.torch, a, o, seed) if b == "pytorch"
                                 else epoch_seconds(b, a, o, seed))
        print(f"round {r}: " + "  ".join(
            f"{b} {res[b, ORDERS[0]][-1] * 1e3:.2f}/{res[b, ORDERS[1]][-1] * 1e3:.2f} ms"
            for b in systems), flush=True)
    for b in systems:
        s, g = (statistics.median(res[b, o]) for o in ORDERS)
        print(f"{b}: median epoch shuffled {s * 1e3:.2f} ms, length-grouped {g * 1e3:.2f} ms, "
              f"ratio {s / g:.3f}")


if __name__ == "__main__":
    main()
