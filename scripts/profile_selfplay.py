"""Where a training config's self-play time goes, op by op, attributed to our source.

    python scripts/profile_selfplay.py --config configs/hex5_curiosity.yaml [--set KEY=VALUE ...]
        [--repeats 2] [--top 25] [--rows]
        [--out results/bench/profile_selfplay_<name>_<backend>.csv]

Compiles ``Trainer.self_play_phase`` (the iteration's self-play moves, as ``bench train``
times it), runs it once to warm up and ``--repeats`` times for the wall clock, then
once under ``jax.profiler``. Each XLA op the trace shows is matched to the compiled
program's instruction and, through its stack frame, to the innermost function of
``curiosity_search`` it came from. Container ops (while, conditional, call) are left
out: their time is that of the ops inside them plus the loop's own dispatch, which is
reported as ``wall - ops``.

Prints (and writes as CSV rows ``view, name, ms, fraction``):

- ``component``: the ops grouped by the first match, innermost frame outwards, of:
  ``pbest_kernel`` (curiosity/best_arm.py, score_cdf.py), ``incremental_cache``
  (selection_cache.py), ``network`` (nets/, or an op named under ``Network/`` whose
  stack frame XLA dropped), ``environment`` (envs/, pgx), ``curiosity_backup``
  (curiosity/backup.py), ``curiosity_other`` (the rest of curiosity/), ``search_kernel``
  (search/), ``selfplay`` (train/), else ``unattributed``;
- ``function``: the ``--top`` innermost ``file:function`` sites;
- ``wall``: the fastest run, the profiled run's op total and the share of that run's
  wall time its op events span. The profiler keeps about a million trace events; a
  longer phase (curiosity on hex5 executes ~400k ops in half its 16 moves) loses the
  rest, and the script warns below 90%: profile fewer moves then
  (``--set selfplay.moves_per_iteration=4``).

``--rows`` (curiosity only) also counts, in one more self-play phase compiled with
counters, the P(best) rows per tree-simulation by site, active (trees that need a
row) and computed (``compaction.compacted_map``'s slot sizes): the backup levels'
full recomputations, the root rebuilds of the incremental layout and the lazy prior
fills. A profile, not a benchmark: compare components within one run.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import re
import tempfile
import time

import jax

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.bench.pbest_rows import count_pbest_rows
from curiosity_search.compilation_cache import enable_compilation_cache
from curiosity_search.config.loading import load_config
from curiosity_search.train.trainer import build_trainer

# Innermost frame outwards, the first (path fragment, component) that matches names it.
COMPONENTS = (
    ("curiosity/best_arm.py", "pbest_kernel"),
    ("curiosity/score_cdf.py", "pbest_kernel"),
    ("curiosity/selection_cache.py", "incremental_cache"),
    ("curiosity_search/nets/", "network"),
    ("curiosity_search/envs/", "environment"),
    ("/pgx/", "environment"),
    ("curiosity/backup.py", "curiosity_backup"),
    ("curiosity_search/curiosity/", "curiosity_other"),
    ("curiosity_search/search/", "search_kernel"),
    ("curiosity_search/train/", "selfplay"),
)
_CONTAINER = re.compile(r"(?<![\w-])(while|conditional|call)\(")  # not custom-call(
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*)$")


def _stack_tables(hlo_text: str) -> dict[int, list[tuple[str, str, int]]]:
    """Stack frame id -> ``[(file, function, line), ...]``, innermost first, from the
    ``FileNames`` / ``FunctionNames`` / ``FileLocations`` / ``StackFrames`` tables of a
    compiled module's text (a frame's ``parent_frame_id`` p names frame p - 1; 0: none)."""
    tables: dict[str, dict[int, str]] = collections.defaultdict(dict)
    section = None
    for line in hlo_text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = line
            continue
        match = re.match(r"^(\d+) (.*)$", line)
        if section and match:
            tables[section][int(match.group(1))] = match.group(2)
        elif line.strip():
            section = None
    files = {i: text.strip('"') for i, text in tables["FileNames"].items()}
    functions = {i: text.strip('"') for i, text in tables["FunctionNames"].items()}
    locations = {}
    for i, text in tables["FileLocations"].items():
        fields = dict(re.findall(r"(\w+)=(\d+)", text))
        locations[i] = (files[int(fields["file_name_id"])],
                        functions[int(fields["function_name_id"])], int(fields["line"]))
    frames = {}
    for i, text in tables["StackFrames"].items():
        fields = dict(re.findall(r"(\w+)=(\d+)", text))
        frames[i] = (int(fields["file_location_id"]), int(fields["parent_frame_id"]) - 1)
    stacks = {}
    for frame in frames:
        stack, current = [], frame
        while current > 0 and current in frames and len(stack) < 200:
            location, current = frames[current]
            stack.append(locations[location])
        stacks[frame] = stack
    return stacks


def _instructions(hlo_text: str) -> dict[str, tuple[bool, str, list]]:
    """Instruction name -> ``(leaf, op_name, stack)`` for the compiled module."""
    stacks = _stack_tables(hlo_text)
    out = {}
    for line in hlo_text.splitlines():
        match = _INSTRUCTION.match(line)
        if not match:
            continue
        name, rest = match.groups()
        frame = re.search(r"stack_frame_id=(\d+)", rest)
        op_name = re.search(r'op_name="([^"]*)"', rest)
        out[name] = (not _CONTAINER.search(rest), op_name.group(1) if op_name else "",
                     stacks.get(int(frame.group(1)), []) if frame else [])
    return out


def _component(op_name: str, stack: list) -> str:
    for file, _, _ in stack:
        for fragment, component in COMPONENTS:
            if fragment in file:
                return component
    return "network" if "Network/" in op_name else "unattributed"


def _function(stack: list) -> str:
    for file, function, _ in stack:
        if "curiosity_search/" in file:
            return f"{file.split('curiosity_search/', 1)[1]}:{function}"
    return "unattributed"


def profile(play, state, key) -> tuple[dict[str, float], dict[str, float], float]:
    """Per-component and per-function op milliseconds of one ``play(state, key)``, and
    the share of that run's wall time its op events span (below 1 when the profiler's
    event cap cut the trace short: the figures then cover the run's first part only)."""
    instructions = _instructions(play.lower(state, key).compile().as_text())
    with tempfile.TemporaryDirectory(prefix="profile_selfplay_") as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            start = time.perf_counter()
            jax.block_until_ready(play(state, key))
            wall = time.perf_counter() - start
        trace = sorted(glob.glob(f"{folder}/**/*.json.gz", recursive=True))[-1]
        with gzip.open(trace) as handle:
            events = json.load(handle)["traceEvents"]
    components: collections.Counter = collections.Counter()
    functions: collections.Counter = collections.Counter()
    first, last = float("inf"), float("-inf")
    for event in events:
        if event.get("ph") != "X" or "dur" not in event:
            continue
        found = instructions.get(event["name"])
        if found is None or not found[0]:
            continue
        _, op_name, stack = found
        components[_component(op_name, stack)] += event["dur"] / 1e3
        functions[_function(stack)] += event["dur"] / 1e3
        first, last = min(first, event["ts"]), max(last, event["ts"] + event["dur"])
    coverage = (last - first) / 1e6 / wall if last > first else 0.0
    return dict(components), dict(functions), coverage


def pbest_rows(cfg, trainer_state_key) -> dict[str, float]:
    """P(best) rows per tree-simulation by site, in one counted self-play phase."""
    with count_pbest_rows() as counts:
        trainer = build_trainer(cfg)
        state = jax.jit(trainer.init)(trainer_state_key)
        play = jax.jit(trainer.self_play_phase)
        state, _ = jax.block_until_ready(play(state, jax.random.key(1)))
        counts.clear()
        jax.block_until_ready(play(state, jax.random.key(2)))
    simulations = (cfg.selfplay.batch_size * cfg.selfplay.moves_per_iteration
                   * cfg.search.num_simulations)
    return {name: count / simulations for name, count in sorted(counts.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--rows", action="store_true",
                        help="also count P(best) rows per simulation (curiosity)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    enable_compilation_cache()
    cfg = load_config(args.config, args.set)
    trainer = build_trainer(cfg)
    root_key = jax.random.key(cfg.seed)
    state = jax.jit(trainer.init)(root_key)
    play = jax.jit(trainer.self_play_phase)
    state, _ = jax.block_until_ready(play(state, jax.random.fold_in(root_key, 0)))
    wall = float("inf")
    for repeat in range(args.repeats):
        start = time.perf_counter()
        jax.block_until_ready(play(state, jax.random.fold_in(root_key, 1 + repeat)))
        wall = min(wall, time.perf_counter() - start)
    components, functions, coverage = profile(play, state, jax.random.fold_in(root_key, 99))
    total = sum(components.values())
    rows = [{"view": "wall", "name": "self_play_phase (fastest run)", "ms": wall * 1e3,
             "fraction": ""},
            {"view": "wall", "name": "ops (profiled run)", "ms": total, "fraction": 1.0},
            {"view": "wall", "name": "profiled run's wall time its op events span", "ms": "",
             "fraction": coverage}]
    print(f"{cfg.name}: self-play phase {wall:.3f} s (fastest of {args.repeats}); "
          f"ops in the profiled run {total / 1e3:.3f} s, spanning {coverage:.0%} of its wall time")
    if coverage < 0.9:
        print(f"WARNING: the trace covers only the first {coverage:.0%} of the profiled run "
              "(the profiler keeps about a million events); the figures below are for that "
              "part. Profile fewer moves, e.g. --set selfplay.moves_per_iteration=4.")
    for view, table, limit in (("component", components, None),
                               ("function", functions, args.top)):
        print(f"by {view}:")
        for name, ms in sorted(table.items(), key=lambda item: -item[1])[:limit]:
            print(f"  {ms:9.1f} ms {ms / total:6.1%}  {name}")
            rows.append({"view": view, "name": name, "ms": ms, "fraction": ms / total})
    if args.rows:
        print("P(best) rows per tree-simulation:")
        for name, per_simulation in pbest_rows(cfg, root_key).items():
            print(f"  {per_simulation:7.3f}  {name}")
            rows.append({"view": "pbest_rows_per_simulation", "name": name,
                         "ms": "", "fraction": per_simulation})
    out = args.out or (f"results/bench/profile_selfplay_{cfg.name}_"
                       f"{jax.default_backend()}.csv")
    print(f"wrote {write_csv_atomically(out, rows)}")


if __name__ == "__main__":
    main()
