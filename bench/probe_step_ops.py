"""What one train step runs, shim and hand loop, on N replicas: op counts and op time by type.

    python -m bench.probe_step_ops [--replicas 8] [--steps 10] [--top 30]

Issue 45's per-step question: what does the shim's compiled train loop run beyond the hand
loop's? One process holds both sides as `bench/call_cost.py` builds them (the bench's CNN,
global batch 128; the shim unseeded, so its loop is instantiated once). For each side:

- nodes: the partition graphs of its compiled train loop as TensorFlow runs them (after
  Grappler and placement, the while loop lowered, one graph per device), by op type, from
  TensorFlow's graph collection during the call that instantiates the loop. Counts do not
  depend on the machine's load.
- ms: one `--steps` call under `tf.profiler.experimental`, the time of the host plane's op
  events (`node:OpType`) by op type, summed over devices and steps. These do depend on load;
  compare op types within a run. A collective's time includes its wait for the other
  devices.

Both sides run under this process's settings (set `TF_CPU_ALLOCATOR_USE_BFC` before it
starts to change the allocator of both).
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys
import tempfile
import time
from typing import Any, Callable

from bench import call_cost

_OP_EVENT = re.compile(r"^[^:]+:(?P<type>[A-Za-z0-9_]+)$")  # "while/body/.../MatMul:MatMul"


def loop_nodes(call: Callable[[int], Any], n: int) -> collections.Counter:
    """Node counts by op type of the largest multi-device function `call(n)` instantiates."""
    from tensorflow.python.eager import context  # Graph collection: no public switch.

    ctx = context.context()
    ctx.enable_graph_collection()
    try:
        call(n)
        graphs = ctx.export_run_metadata().function_graphs
    finally:
        ctx.disable_graph_collection()
    biggest = max(graphs, key=lambda g: sum(len(p.node) for p in g.partition_graphs),
                  default=None)
    counts: collections.Counter = collections.Counter()
    for partition in biggest.partition_graphs if biggest is not None else ():
        counts.update(node.op for node in partition.node)
    return counts


def op_times(call: Callable[[int], Any], n: int) -> tuple[collections.Counter, float]:
    """({op type: ms}, wall seconds) of `call(n)` under TensorFlow's profiler."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    logdir = tempfile.mkdtemp(prefix="probe_step_ops_")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    try:
        call(n)
    finally:
        wall = time.perf_counter() - start
        tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True)[0],
              "rb") as f:
        space.ParseFromString(f.read())
    ms: collections.Counter = collections.Counter()
    for plane in space.planes:
        if plane.name != "/host:CPU":
            continue
        for line in plane.lines:
            for event in line.events:
                match = _OP_EVENT.match(plane.event_metadata[event.metadata_id].name)
                if match:
                    ms[match["type"]] += event.duration_ps / 1e9
    return ms, wall


def table(nodes: dict[str, collections.Counter], ms: dict[str, collections.Counter],
          top: int) -> str:
    """Markdown: op types by the larger side's time, then every type whose count differs."""
    types = sorted(set().union(*nodes.values(), *ms.values()),
                   key=lambda t: -max(ms["shim"][t], ms["tf2"][t]))
    shown = types[:top] + [t for t in types[top:] if nodes["shim"][t] != nodes["tf2"][t]]
    rows = ["| op type | nodes shim | nodes hand | ms shim | ms hand |", "|---|---|---|---|---|"]
    for t in shown:
        rows.append(f"| {t} | {nodes['shim'][t]} | {nodes['tf2'][t]} | {ms['shim'][t]:.0f} | "
                    f"{ms['tf2'][t]:.0f} |")
    rows.append(f"| all | {sum(nodes['shim'].values())} | {sum(nodes['tf2'].values())} | "
                f"{sum(ms['shim'].values()):.0f} | {sum(ms['tf2'].values()):.0f} |")
    return "\n".join(rows)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.probe_step_ops", description=__doc__)
    p.add_argument("--replicas", type=int, default=8)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--top", type=int, default=30)
    args = p.parse_args(argv)
    call_cost._env()
    from bench import data, devices

    names = devices.split_cpu(args.replicas)
    import tensorflow as tf

    from tpu_estimator_compat.session import strategy as strategy_lib

    tmp = tempfile.mkdtemp(prefix="probe_step_ops_")
    npz = os.path.join(tmp, "digits.npz")
    data.generate(npz, call_cost.REPO)
    strategy = (strategy_lib.mirrored_over(names) if args.replicas > 1
                else tf.distribute.get_strategy())
    nodes, ms = {}, {}
    # The hand loop's tf_keras model is built first (see call_cost.measure).
    hand = call_cost._hand_side(strategy, npz)
    nodes["tf2"] = loop_nodes(hand["train"], 1)
    shim = call_cost._shim_side(names, npz, tmp, seed=None)
    nodes["shim"] = loop_nodes(shim["train"], 1)
    for side, train in (("tf2", hand["train"]), ("shim", shim["train"])):
        ms[side], wall = op_times(train, args.steps)
        print(f"{side}: {args.steps} steps in {wall:.2f} s, load1 {os.getloadavg()[0]:.1f}")
    print(table(nodes, ms, args.top))
    sys.stdout.flush()
    os._exit(0)  # As bench.common.emit: 8-replica pipelines can take minutes to tear down.


if __name__ == "__main__":
    main(sys.argv[1:])
