"""Coupled ranks (`mhc simulate --ranks`) as docs/simulator.md ("Coupled ranks") and
docs/trace-format.md ("Multi-rank traces") state them, written from the documents alone: the
cross-rank kernels, their communicators and matching, the waits with their slacks, the ranks run
together (reference_sim.Sim.steps) and the job's figures."""
import re
import sqlite3

import reference_sim as ref

COMM = 5   # allocations.category `comm`


def kernel_op(name):
    """The operation of an NCCL kernel matched across ranks, '' for any other name."""
    if not name or not name.startswith("nccl") or "Kernel_" not in name:
        return ""
    return re.match(r"[A-Za-z0-9]*", name.split("Kernel_", 1)[1]).group(0)


class Rank:
    def __init__(self, path, index, sim):
        self.path, self.index, self.sim = path, index, sim
        tr = sim.tr
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        meta = dict(db.execute("SELECT key, value FROM meta"))
        streams = dict(db.execute("SELECT id, stream FROM kernels"))
        category = dict(db.execute("SELECT id, category FROM allocations"))
        db.close()
        self.rank = int(meta.get("rank", index))
        self.origin = int(meta.get("time_origin_ns", 0))
        self.meta = meta
        self.events = []   # (seq, stream, op, role)
        for s, k in enumerate(tr.kernels):
            op = kernel_op(k[4])
            if op:
                self.events.append([s, streams[k[0]], op, self.role(op, s, category)])

    def role(self, op, s, category):
        if op in ("Send", "Recv"):
            return op
        if op != "SendRecv":
            return "collective"
        tr = self.sim.tr
        if tr.assumed:
            return "SendRecv"
        writes = reads = False
        for a, mode in tr.operands[s]:
            if category[tr.allocs[a][0]] == COMM:
                continue
            if mode & 2:
                writes = True
            elif mode & 1:
                reads = True
        return "Recv" if writes and not reads else "Send" if reads and not writes else "SendRecv"


def plan(ranks):
    """waits[r][g] = [(rank index p, its event, slack)] for every cross-rank event g of rank r."""
    by_rank = {r.rank: r.index for r in ranks}
    users = {}   # stream -> global ranks using it without a named communicator
    comm_of = []  # per rank: stream -> (name, members as global ranks)
    for r in ranks:
        mine = {}
        for _, stream, _, _ in r.events:
            if stream in mine:
                continue
            v = r.meta.get(f"nccl.stream.{stream}")
            if v is not None:
                name, members = v.rsplit(":", 1)
                mine[stream] = (name, sorted(int(m) for m in members.split(",")))
            else:
                mine[stream] = (f"stream {stream}", None)
                users.setdefault(stream, [])
                if r.rank not in users[stream]:
                    users[stream].append(r.rank)
        comm_of.append(mine)
    channels = {}   # (communicator, key) -> {rank index: [event index]}
    members_of = {}
    for r in ranks:
        count = {}
        for g, (_, stream, op, role) in enumerate(r.events):
            name, members = comm_of[r.index][stream]
            members = members if members is not None else sorted(users[stream])
            members_of[name] = [by_rank[m] for m in members]
            key = "collective"
            if op in ("SendRecv", "Send", "Recv"):
                peer = next(m for m in members if m != r.rank)
                key = (f"{r.rank}>{peer}" if role == "Send" else f"{peer}>{r.rank}" if role == "Recv"
                       else "sendrecv")
            count[name] = count.get(name, 0) + 1
            channels.setdefault((name, key), {}).setdefault(r.index, []).append(g)
    waits = [[[] for _ in r.events] for r in ranks]
    for (name, key), per in channels.items():
        if ">" in key:
            a, b = key.split(">")
            parts = [by_rank[int(a)], by_rank[int(b)]]
        else:
            parts = members_of[name]
        length = len(per.get(parts[0], []))
        for k in range(length):
            arrived = {m: ranks[m].sim.tr.kernels[ranks[m].events[per[m][k]][0]][2] + ranks[m].origin for m in parts}
            last = max(arrived.values())
            for m in parts:
                g = per[m][k]
                if ranks[m].events[g][3] == "Send":   # a send waits for nobody
                    continue
                for p in parts:
                    if p != m:
                        waits[m][g].append((p, per[p][k], last - arrived[p]))
    return waits


def drive(ranks, waits):
    """Runs the ranks together; returns which stopped because a rank they waited for did."""
    n = len(ranks)
    gens = []
    for r in ranks:
        gates = {seq: g for g, (seq, _, _, _) in enumerate(r.events)}
        gens.append(r.sim.steps(gates))
    arrivals = [r.sim.arrivals for r in ranks]   # filled as the ranks start their cross-rank kernels
    paused = [None] * n       # the event a rank waits at
    pending = [None] * n      # what to send it when it runs next (None: start or a halt)
    runnable = [True] * n
    ended = [False] * n
    halted = [False] * n
    started = [False] * n
    left = n
    while left:
        moved = False
        for r in range(n):
            if not runnable[r]:
                continue
            runnable[r] = False
            moved = True
            try:
                if not started[r]:
                    started[r] = True
                    g = next(gens[r])
                else:
                    g = gens[r].send(pending[r])
                paused[r] = g
            except StopIteration:
                ended[r] = True
                left -= 1
                if halted[r] or len(arrivals[r]) < len(ranks[r].events):
                    halted[r] = True   # those who wait for its later events stop too
        for r in range(n):
            g = paused[r]
            if g is None:
                continue
            missing = [(p, e) for p, e, _ in waits[r][g] if e not in arrivals[p]]
            if any(halted[p] for p, _ in missing):
                halted[r] = True
                paused[r], pending[r], runnable[r] = None, None, True
                moved = True
                continue
            if missing:
                continue
            delay = max((arrivals[p][e] - slack for p, e, slack in waits[r][g]), default=-(1 << 62))
            paused[r], pending[r], runnable[r] = None, delay, True
            moved = True
        if not moved and left:
            raise SystemExit("reference: the ranks deadlock")
    return halted


def simulate(paths, capacities, policy, link, allocator, traces=None):
    """traces: each rank's rows (reference_sim.Trace on its largest peak's device), read before (a run
    only reads them), else read here."""
    traces = traces or [ref.Trace(p) for p in paths]
    sims = [ref.Sim(tr, cap, policy, link, 0, allocator) for tr, cap in zip(traces, capacities)]
    ranks = [Rank(p, i, s) for i, (p, s) in enumerate(zip(paths, sims))]
    halted = drive(ranks, plan(ranks))
    return ranks, halted


def job(ranks, halted):
    """The job's figures: makespans on the shared clock, limiting, last and out-of-memory ranks."""
    begin = {r.index: r.sim.first + r.origin for r in ranks}
    b0 = min(begin.values())
    b1 = max(r.sim.last + r.origin for r in ranks)
    best = {"last": (None, None), "limiting": (None, None), "oom": (None, None)}

    def pick(what, r, v, largest):
        i, bv = best[what]
        if i is None or (v > bv if largest else v < bv) or (v == bv and ranks[r].rank < ranks[i].rank):
            best[what] = (r, v)
    for r in ranks:
        m = r.sim.result.metrics
        pick("last", r.index, begin[r.index] + m["simulated_makespan_ns"], True)
        if m["stall_ns"] > 0:
            pick("limiting", r.index, m["stall_ns"], True)
        if m["oom"]:
            pick("oom", r.index, r.origin + r.sim.oom_at, False)
    s1 = begin[best["last"][0]] + ranks[best["last"][0]].sim.result.metrics["simulated_makespan_ns"]
    glob = lambda i: -1 if i is None else ranks[i].rank   # noqa: E731
    return {"baseline_makespan": b1 - b0, "simulated_makespan": s1 - b0, "limiting_rank": glob(best["limiting"][0]),
            "last_rank": glob(best["last"][0]), "oom_rank": glob(best["oom"][0])}
