"""Which jobs `mhc simulate --ranks` takes and which it refuses, read from the documents alone
(docs/trace-format.md "Multi-rank traces": job identity, cross-rank events, communicators, matching;
docs/simulator.md "Coupled ranks": what waits for what, **Order**). Shares no code with sim/ or with
reference_coupled.py.

admit(paths) returns (None, warnings) for a job the documents say is simulated, or (reason, files)
for one they say is refused (exit 2): the reason's class (identity, match, deadlock) and the files
the refusal may name. Standard library only."""
import re
import sqlite3

JOB_KEYS = ("job.id", "world_size", "rank", "time_origin_ns")
P2P = ("SendRecv", "Send", "Recv")
COMM = 5   # allocations.category `comm`
READ, WRITE, READ_WRITE = 1, 2, 3


class Refused(Exception):
    def __init__(self, kind, files, why):
        super().__init__(why)
        self.kind, self.files, self.why = kind, files, why


def cross_op(name):
    """docs/trace-format.md: a kernel whose name starts with `nccl` and contains `Kernel_OP`; OP is the
    letters and digits after the first `Kernel_` (docs/simulator.md)."""
    if not name.startswith("nccl") or "Kernel_" not in name:
        return None
    return re.match(r"[A-Za-z0-9]*", name.split("Kernel_", 1)[1]).group(0)


class RankFile:
    def __init__(self, path, position):
        self.path, self.position = str(path), position
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.meta = dict(db.execute("SELECT key, value FROM meta"))
        strings = dict(db.execute("SELECT id, text FROM strings"))
        # the simulated device: one device in these jobs, the GPU with allocations or kernels (device 0)
        rows = db.execute("SELECT id, stream, name, t_start, t_end FROM kernels WHERE device = 0 "
                          "ORDER BY t_start, id").fetchall()
        cats = dict(db.execute("SELECT id, category FROM allocations WHERE device = 0"))
        acc = {}
        for k, a, mode in db.execute("SELECT kernel, allocation, mode FROM accesses"):
            if a in cats:
                acc.setdefault(k, []).append((a, mode))
        any_access = bool(acc)
        times = [v for row in db.execute("SELECT min(t_start), max(t_end) FROM kernels UNION ALL "
                                          "SELECT min(t_alloc), max(coalesce(t_free, t_alloc)) FROM allocations")
                 for v in row if v is not None]
        self.first, self.last = min(times), max(times)
        self.order_only = self.meta.get("timing") == "order-only"
        db.close()
        self.cross = []   # (seq, stream, op, role, t_start, t_end)
        for seq, (kid, stream, name, t0, t1) in enumerate(rows):
            op = cross_op(strings.get(name, ""))
            if op is None:
                continue
            role = None
            if op == "Send":
                role = "send"
            elif op == "Recv":
                role = "recv"
            elif op == "SendRecv":
                role = "sendrecv"
                if any_access:   # only recorded accesses give the role
                    plain = [m for a, m in acc.get(kid, []) if cats[a] != COMM]
                    writes = any(m in (WRITE, READ_WRITE) for m in plain)
                    reads = any(m == READ for m in plain)
                    role = "recv" if writes and not reads else "send" if reads and not writes else "sendrecv"
            self.cross.append((seq, stream, op, role, t0, t1))
        self.rank = None

    def label(self):
        return f"{self.path} (rank {self.rank})"


def identity(files):
    """docs/trace-format.md, Job identity: the refusals before coupling; the ranks' global numbers."""
    warnings = []
    for f in files:   # docs/simulator.md "Inputs": ranks are coupled by time
        if f.order_only or f.first == f.last:
            raise Refused("identity", [f.path], "order-only or every event at one instant")
    for key in JOB_KEYS:
        have = [f for f in files if key in f.meta]
        if have and len(have) < len(files):
            raise Refused("identity", [f.path for f in files if key not in f.meta] + [f.path for f in have],
                          f"{key} some have, others lack")
    if len(files) > 1 and not any(k in files[0].meta for k in JOB_KEYS):   # one trace alone is a job of one
        warnings.append("assumed one job")
    host = [f.path for f in files if "kineto.host_collectives" in f.meta]   # docs/simulator.md "Cross-rank kernels"
    if host:
        warnings.append(("host collectives", host))
    for key in ("job.id", "world_size"):
        if key in files[0].meta and len({f.meta[key] for f in files}) > 1:
            raise Refused("identity", [f.path for f in files], f"{key} differs")
    for i, f in enumerate(files):
        f.rank = int(f.meta["rank"]) if "rank" in f.meta else i
    if "world_size" in files[0].meta:
        ws = int(files[0].meta["world_size"])
        outside = [f.path for f in files if not 0 <= f.rank < ws]
        if outside:
            raise Refused("identity", outside, "rank outside world_size")
        if len(files) != ws or len({f.rank for f in files}) != ws:
            raise Refused("identity", [f.path for f in files], "not the whole job")
    if "time_origin_ns" in files[0].meta:
        spans = [(int(f.meta["time_origin_ns"]) + f.first, int(f.meta["time_origin_ns"]) + f.last, f) for f in files]
        for b0, _, f in spans:
            for _, e1, g in spans:
                if b0 > e1:
                    raise Refused("identity", [f.path, g.path], "a trace wholly after another's")
    return warnings


def communicators(files):
    """Each cross-rank kernel's communicator, and each communicator's members (global ranks)."""
    by_rank = {f.rank: f for f in files}
    comms = {}   # name -> members (sorted tuple)
    kernel_comm = {}   # (rank, seq) -> name
    unnamed, naming = {}, {}
    for f in files:
        for seq, stream, op, role, _, _ in f.cross:
            key = f.meta.get(f"nccl.stream.{stream}")
            if key is None:
                name = f"stream {stream}"
                unnamed.setdefault(name, set()).add(f.rank)
            else:
                name, _, members = key.partition(":")
                members = tuple(int(m) for m in members.split(",") if m.strip() != "")
                naming.setdefault(name, set()).add(f.path)
                if name in comms and comms[name] != members:
                    raise Refused("match", sorted(naming[name]), f"communicator {name}: members differ")
                comms[name] = members
            kernel_comm[(f.rank, seq)] = name
    for name, ranks in unnamed.items():
        comms[name] = tuple(sorted(ranks))
    for name, members in comms.items():
        missing = [m for m in members if m not in by_rank]
        if missing:
            raise Refused("match", [f.path for f in files], f"communicator {name}: member {missing[0]} not given")
    for (rank, seq), name in kernel_comm.items():
        if rank not in comms[name]:
            raise Refused("match", [by_rank[rank].path], f"rank {rank} not a member of {name}")
    return comms, kernel_comm


def match(files):
    """The k-th collective of a communicator on every member; point-to-point per direction. Returns,
    for each (rank, seq) of a cross-rank kernel that waits, the (rank, seq) kernels whose arrival it
    waits for."""
    comms, kernel_comm = communicators(files)
    by_rank = {f.rank: f for f in files}
    coll = {}   # (name, rank) -> [(seq, op)]
    p2p = {}    # (name, rank, role) -> [seq]
    for f in files:
        for seq, stream, op, role, _, _ in f.cross:
            name = kernel_comm[(f.rank, seq)]
            if op in P2P:
                p2p.setdefault((name, f.rank, role), []).append(seq)
            else:
                coll.setdefault((name, f.rank), []).append((seq, op))
    waits = {}
    for name, members in comms.items():
        lists = [coll.get((name, m), []) for m in members]
        if any(lists):
            if len({len(x) for x in lists}) > 1:
                raise Refused("match", [by_rank[m].path for m in members], f"{name}: collective counts differ")
            for k in range(len(lists[0])):
                if len({x[k][1] for x in lists}) > 1:
                    raise Refused("match", [by_rank[m].path for m in members], f"{name}: collective {k} ops differ")
                for m, x in zip(members, lists):
                    waits[(m, x[k][0])] = [(o, y[k][0]) for o, y in zip(members, lists) if o != m]
        if any((name, m, r) in p2p for m in members for r in ("send", "recv", "sendrecv")):
            if len(members) != 2:
                raise Refused("match", [by_rank[m].path for m in members], f"{name}: point-to-point needs 2 ranks")
            a, b = members
            for x, y in ((a, b), (b, a)):
                sends, recvs = p2p.get((name, x, "send"), []), p2p.get((name, y, "recv"), [])
                if len(sends) != len(recvs):
                    raise Refused("match", [by_rank[a].path, by_rank[b].path], f"{name}: sends and receives differ")
                for s, r in zip(sends, recvs):
                    waits[(y, r)] = [(x, s)]   # a receive waits for its send; a send for nobody
            sa, sb = p2p.get((name, a, "sendrecv"), []), p2p.get((name, b, "sendrecv"), [])
            if len(sa) != len(sb):
                raise Refused("match", [by_rank[a].path, by_rank[b].path], f"{name}: send-receives differ")
            for s, r in zip(sa, sb):
                waits[(a, s)] = [(b, r)]
                waits[(b, r)] = [(a, s)]
    return waits


def events(f):
    """The rank's cross-rank kernel starts and ends in the simulator's order (docs/simulator.md
    "Inputs"): at one instant kernel ends, then starts, each in kernel order; a zero-length kernel's
    end right after its start."""
    out = []
    for seq, stream, op, role, t0, t1 in f.cross:
        out.append(((t0, 1, seq, 0), "start", seq))
        out.append(((t0, 1, seq, 1) if t1 == t0 else (t1, 0, seq, 0), "end", seq))
    return [(kind, seq) for _, kind, seq in sorted(out)]


def walk(files, waits):
    """docs/simulator.md, Order: a rank stops only at the end of a cross-rank kernel whose bound needs
    another rank's arrival; the recorded order walked once; one that cannot complete is refused."""
    evs = {f.rank: events(f) for f in files}
    pos = {r: 0 for r in evs}
    arrived = set()
    moved = True
    while moved:
        moved = False
        for r, ev in evs.items():
            while pos[r] < len(ev):
                kind, seq = ev[pos[r]]
                if kind == "start":
                    arrived.add((r, seq))
                elif not all(w in arrived for w in waits.get((r, seq), [])):
                    break
                pos[r] += 1
                moved = True
    stuck = [f.path for f in files if pos[f.rank] < len(evs[f.rank])]
    if stuck:
        raise Refused("deadlock", stuck, "the recorded order cannot complete")


def admit(paths):
    files = [RankFile(p, i) for i, p in enumerate(paths)]
    try:
        warnings = identity(files)
        walk(files, match(files))
    except Refused as e:
        return e, e.files
    return None, warnings
