"""Demo: train a small MLP for a few steps on `neuron` and on the CPU from the same weights,
print the losses side by side, then the table of ops that ran natively and on the CPU fallback.

    python examples/train_mlp.py [--steps 20] [--batch 64]
"""
import argparse
import copy
import time
import warnings

import torch
import torch_neuronx


def make_data(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 32, generator=g)
    w = torch.randn(32, 1, generator=g)
    y = (x @ w + 0.1 * torch.randn(n, 1, generator=g)).tanh()
    return x, y


def train(model, x, y, steps, batch, device):
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(steps):
        i = (step * batch) % x.shape[0]
        xb, yb = x[i : i + batch].to(device), y[i : i + batch].to(device)
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def op_table(executed, fallback):
    names = sorted(set(executed) | set(fallback))
    width = max([len(n) for n in names] + [10])
    lines = [f"{'aten op':<{width}}  {'native':>7}  {'CPU fallback':>12}", "-" * (width + 23)]
    for n in names:
        lines.append(f"{n:<{width}}  {executed.get(n, 0):>7}  {fallback.get(n, 0):>12}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*has no native neuron kernel.*")

    props = torch.neuron.get_device_properties(0)
    print(f"device: {torch.accelerator.current_accelerator()} x{torch.neuron.device_count()} "
          f"({props.name}, {props.total_memory / 2**30:.0f} GiB each)")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(),
        torch.nn.Linear(64, 1))
    x, y = make_data(args.steps * args.batch)

    for device in ("cpu", "neuron"):  # warm-up: one-time start-up costs stay out of the timing
        train(copy.deepcopy(model), x, y, 1, args.batch, device)
    t0 = time.perf_counter()
    cpu_losses = train(copy.deepcopy(model), x, y, args.steps, args.batch, "cpu")
    t1 = time.perf_counter()
    torch_neuronx.clear_op_tracking()
    neuron_losses = train(copy.deepcopy(model), x, y, args.steps, args.batch, "neuron")
    torch.neuron.synchronize()
    t2 = time.perf_counter()

    print(f"\n{'step':>4}  {'loss (neuron)':>14}  {'loss (cpu)':>12}  {'|diff|':>9}")
    for i, (a, b) in enumerate(zip(neuron_losses, cpu_losses)):
        print(f"{i:>4}  {a:>14.6f}  {b:>12.6f}  {abs(a - b):>9.2e}")
    worst = max(abs(a - b) for a, b in zip(neuron_losses, cpu_losses))
    print(f"\nmax |loss difference| {worst:.2e}; "
          f"time neuron {t2 - t1:.2f}s vs cpu {t1 - t0:.2f}s ({args.steps} steps)")
    print(f"neuron:0 memory: {torch.neuron.memory_allocated() / 2**10:.0f} KiB allocated, "
          f"peak {torch.neuron.max_memory_allocated() / 2**10:.0f} KiB\n")
    executed, fallback = torch_neuronx.get_executed_ops(), torch_neuronx.get_fallback_ops()
    print(op_table(executed, fallback))
    print(f"\n{sum(executed.values())} native op calls, {sum(fallback.values())} CPU-fallback op "
          f"calls over {len(fallback)} distinct ops.")


if __name__ == "__main__":
    main()
