#!/usr/bin/env python3
"""Is the search's first answer the fastest of every combination predicted exactly? docs/advise.md
("Search") says tests/advise checks it on small synthetic steps; this checks it on captured ones
with the second readings (reference_search.py's search, reference_settings.py's predictions of
every combination of the block choices, the global settings and the allocator settings the search
tries on the step: as captured, expandable segments and a max_split_size_mb where one is kept), at the
capacities reference_search_compare.py uses; a combination fits when it runs at the capacity
(reference_search.at_capacity), its time there including what giving cached memory back costs. By hand (minutes per capture):
    python3 tests/sim/reference_search_exhaustive.py TRACE.db...
Prints one line per capacity: 'same', 'SLOWER by ...', or where one finds nothing and the other does.
"""
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reference_search as rs  # noqa: E402
import reference_settings as ref  # noqa: E402
import reference_search_compare as rsc  # noqa: E402
for trace in sys.argv[1:]:
    cap = ref.Captured(trace)
    bids = rs.blocks(cap); names = [cap.modules[b]["name"] for b in bids]
    choices = [c for c in range(len(rs.CHOICES))
               if rs.CHOICES[c] != "mhc" or all(rs.has_type(cap, b, "HcMaps") for b in bids)]
    has_opt = bool(ref.optimizer_steps(cap))
    globals_ = [{}]
    foreach = any(k["name"].startswith("aten::_foreach_") for k in cap.kernels)
    if has_opt and not rs.grads_read_on_gpu(cap):   # the host's step fused where the fused AdamW is offered
        globals_.append({"optimizer": {"state": "host", "impl": "fused"} if foreach else {"state": "host"}})
    if foreach: globals_.append({"optimizer": {"impl": "fused"}})
    allocators, _kept = rs.allocator_settings(cap, lambda s: ref.predict(trace, s, cap=cap), on=globals_)
    every = []
    for g in globals_:
        for ch in itertools.product(choices, repeat=len(bids)):
            # once per offload mode where a block offloads (one set of hooks: one mode per combination)
            offloads = any(rs.CHOICES[c] in rs.OFFLOADING for c in ch)
            for off, conf in itertools.product(rs.BLOCK_OFFLOADS if offloads else rs.BLOCK_OFFLOADS[:1], allocators):
                s = rs.combine(names, (g, off), list(ch))
                if conf: s["allocator"] = conf
                p = ref.predict(trace, s, cap=cap)
                every.append((p["step_time_ns"], p["reserved_bytes"], rs.setting_json(s), p))
    for what, capacity in rsc.capacities(trace):
        # fitting: runs at the capacity (docs/advise.md "What fits"), PyTorch's free-and-retry included
        # and its time there: the step's and what giving cached memory back costs ("What running at the capacity costs")
        runs = [(e, rs.at_capacity(trace, e[2], e[3], capacity, ref.LINKS["pcie5"], 100e9, 15000)) for e in every]
        fit = sorted(((e[0] + r["cost"],) + e[1:3] for e, r in runs if r["runs"]))
        try:
            r = rs.search(trace, capacity)
            first = r["ranked"][0]
            best = fit[0]
            tag = "same" if first["time"] <= best[0] else f"SLOWER by {first['time'] - best[0]} ns ({(first['time'] / best[0] - 1) * 100:.2f}%)"
            print(f"{trace.split('/')[-1]} {capacity}: search {first['key']} {first['time']}; exhaustive {best[2]} {best[0]}: {tag}")
        except rs.NothingFits:
            print(f"{trace.split('/')[-1]} {capacity}: search nothing; exhaustive {'nothing' if not fit else 'FITS ' + fit[0][2]}")
    print(f"{trace}: {len(every)} combinations predicted", flush=True)
