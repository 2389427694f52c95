#!/usr/bin/env python3
"""Runs `mhc simulate --ranks` beside reference_rank_admission.py (which jobs docs/trace-format.md
"Multi-rank traces" and docs/simulator.md "Coupled ranks" say are simulated and which refused, read
from the documents alone) on random jobs of 2 to 4 ranks (reference_outside_compare.random_job:
collectives of the whole job, point-to-point kernels between ranks 0 and 1, named communicators or
stream numbers, job keys or none), each changed by one of these, or left whole:

  job_id, world_size, rank_outside, drop_key, drop_file, far_origin   (job identity)
  drop_collective, rename_op, flip_role, no_accesses, members, not_given, p2p_world   (matching)
  host_collectives   (meta kineto.host_collectives on some ranks: named in the warning line)
and, in one job in two first, some collectives moved to a second communicator over a subgroup
(stream 14: a swap of two collectives can then deadlock):

  swap, swap_across   (two cross-rank kernels of one rank trade places, any two or a collective and a
                       point-to-point kernel: a deadlock or not, as the order says)

Compared: simulated (exit 0) or refused (exit 2, one line naming one of the files the reading names),
and the warning line that a job without job keys gets.

Usage: reference_rank_admission_compare.py MHC WORKDIR [--runs=N] [--seed=S] [--verbose] [--only=K --keep]
Exit 0 when all agree, 1 otherwise (each difference printed with the job's change)."""
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import reference_outside_compare as outside  # noqa: E402
import reference_rank_admission as ref  # noqa: E402

CHANGES = ["none", "none", "job_id", "world_size", "rank_outside", "drop_key", "drop_file", "far_origin",
           "drop_collective", "drop_collective", "rename_op", "flip_role", "flip_role", "no_accesses", "members",
           "not_given", "p2p_world", "p2p_world", "host_collectives", "swap", "swap", "swap_across", "swap_across",
           "swap_across"]


def sql(path, query, args=()):
    db = sqlite3.connect(str(path))
    rows = db.execute(query, args).fetchall()
    db.commit()
    db.close()
    return rows


def meta(path):
    return dict(sql(path, "SELECT key, value FROM meta"))


def cross(path, streams=(13, 14, 23)):
    """The rank's cross-rank kernels (id, stream, name id, t_start, t_end), in start order."""
    q = ",".join(map(str, streams))
    return sql(path, f"SELECT id, stream, name, t_start, t_end FROM kernels WHERE stream IN ({q}) ORDER BY t_start, id")


def change(kind, paths, rng):
    """Applies the change; returns the paths of the job and a note, or None when it does not apply."""
    n = len(paths)
    m = meta(paths[0])
    identity, named = "job.id" in m, "nccl.stream.13" in m
    r = rng.randrange(n)
    p = paths[r]
    if kind == "none":
        return paths, ""
    if kind == "host_collectives":   # ranks whose collectives ran on the host (the Kineto importer's meta)
        some = rng.sample(paths, rng.randint(1, n))
        for q in some:
            sql(q, "INSERT INTO meta (key, value) VALUES ('kineto.host_collectives', 'c10d::allreduce_ 2')")
        return paths, " ".join(q.name for q in some)
    if kind in ("job_id", "world_size", "rank_outside", "drop_key", "far_origin") and not identity:
        return None
    if kind == "job_id":
        sql(p, "UPDATE meta SET value = 'another-job' WHERE key = 'job.id'")
    elif kind == "world_size":
        sql(p, "UPDATE meta SET value = ? WHERE key = 'world_size'", (str(n + rng.choice([1, -1])),))
    elif kind == "rank_outside":
        sql(p, "UPDATE meta SET value = ? WHERE key = 'rank'", (str(rng.choice([n, n + 3, -1])),))
    elif kind == "drop_key":
        key = rng.choice(ref.JOB_KEYS)
        sql(p, "DELETE FROM meta WHERE key = ?", (key,))
        return paths, f"{key} of {p.name}"
    elif kind == "drop_file":
        return paths[:r] + paths[r + 1:], p.name
    elif kind == "far_origin":
        ends = []
        for q in paths:
            if q != p:
                o = int(meta(q)["time_origin_ns"])
                ends.append(o + max(v for (v,) in sql(q, "SELECT max(t_end) FROM kernels UNION ALL "
                                                         "SELECT max(coalesce(t_free, t_alloc)) FROM allocations")
                                    if v is not None))
        first = min(v for (v,) in sql(p, "SELECT min(t_start) FROM kernels UNION ALL "
                                         "SELECT min(t_alloc) FROM allocations") if v is not None)
        sql(p, "UPDATE meta SET value = ? WHERE key = 'time_origin_ns'", (str(max(ends) - first + 10 ** 9),))
    elif kind == "drop_collective":
        ks = cross(p, (13, 14))
        if not ks:
            return None
        k = rng.choice(ks)[0]
        sql(p, "DELETE FROM accesses WHERE kernel = ?", (k,))
        sql(p, "DELETE FROM kernels WHERE id = ?", (k,))
    elif kind == "rename_op":
        ks = cross(p, (13, 14))
        if not ks:
            return None
        k, _, name, _, _ = rng.choice(ks)
        other = rng.choice([x for x in (101, 102, 103, 104) if x != name])   # another collective's name
        sql(p, "UPDATE kernels SET name = ? WHERE id = ?", (other, k))
    elif kind == "flip_role":
        p = paths[rng.randrange(2)]
        ks = cross(p, (23,))
        if not ks:
            return None
        k, _, name, _, _ = rng.choice(ks)
        if name in (106, 107):
            sql(p, "UPDATE kernels SET name = ? WHERE id = ?", (213 - name, k))
        else:   # the SendRecv's own buffer read instead of written, or the other way round, or gone
            if rng.random() < 0.3:
                sql(p, "DELETE FROM accesses WHERE kernel = ? AND allocation IN "
                       "(SELECT id FROM allocations WHERE category != 5)", (k,))
            else:
                sql(p, "UPDATE accesses SET mode = 3 - mode WHERE kernel = ? AND mode != 3", (k,))
        return paths, f"{p.name} kernel {k}"
    elif kind == "no_accesses":
        sql(p, "DELETE FROM accesses")
    elif kind == "members":
        if not named:
            return None
        members = list(range(n))
        if rng.random() < 0.5 and n > 2:
            members.remove(rng.choice([x for x in members if x != r]))
        else:
            members.append(rng.choice([x for x in range(n) if x != r]) if rng.random() < 0.5 else n)
        sql(p, "UPDATE meta SET value = ? WHERE key = 'nccl.stream.13'", ("world:" + ",".join(map(str, members)),))
    elif kind == "not_given":
        if not named:
            return None
        for q in paths:
            sql(q, "UPDATE meta SET value = ? WHERE key = 'nccl.stream.13'",
                ("world:" + ",".join(map(str, range(n + 1))),))
    elif kind == "p2p_world":
        if not cross(paths[0], (23,)) and not cross(paths[1], (23,)):
            return None
        for q in paths[:2]:
            sql(q, "UPDATE kernels SET stream = 13 WHERE stream = 23")
    elif kind in ("swap", "swap_across"):
        if kind == "swap_across":   # a collective and a point-to-point kernel of rank 0 or 1
            p = paths[rng.randrange(2)]
        ks = cross(p)
        pairs = [i for i in range(len(ks) - 1) if kind == "swap" or ks[i][1] != ks[i + 1][1]]
        if not pairs:
            return None
        i = rng.choice(pairs)
        (a, _, _, a0, a1), (b, _, _, b0, b1) = ks[i], ks[i + 1]
        # a collective's buffer does not decide anything here: its accesses go, so that the swapped
        # kernel does not read outside the buffer's lifetime (a SendRecv keeps its own: its role)
        for k, name in ((a, ks[i][2]), (b, ks[i + 1][2])):
            if name != 105:
                sql(p, "DELETE FROM accesses WHERE kernel = ?", (k,))
        # b takes a's start and a starts where b ended, durations kept (nothing else runs in between
        # on the cross-rank streams; the check below refuses an access outside a lifetime)
        sql(p, "UPDATE kernels SET t_start = ?, t_end = ? WHERE id = ?", (a0, a0 + (b1 - b0), b))
        sql(p, "UPDATE kernels SET t_start = ?, t_end = ? WHERE id = ?", (b1 - (a1 - a0), b1, a))
        return paths, f"{p.name} kernels {a} and {b}"
    return paths, p.name


def regroup(paths, rng):
    """Some of the whole job's collectives (the same positions on every rank) move to a second
    communicator on stream 14 over a subgroup of the ranks (all of them, or 2 or more): its members
    keep them, the others lose them. Named as the job names stream 13 (`sub:R,...`), or by the stream."""
    n = len(paths)
    lists = [cross(q, (13,)) for q in paths]
    if min(len(x) for x in lists) < 2:
        return ""
    positions = set(rng.sample(range(len(lists[0])), rng.randint(1, len(lists[0]) - 1)))
    group = sorted(rng.sample(range(n), rng.randint(2, n)))
    named = "nccl.stream.13" in meta(paths[0])
    for r, (q, ks) in enumerate(zip(paths, lists)):
        rank = int(meta(q).get("rank", r))
        for k in (ks[i][0] for i in positions):
            if rank in group:
                sql(q, "UPDATE kernels SET stream = 14 WHERE id = ?", (k,))
            else:
                sql(q, "DELETE FROM accesses WHERE kernel = ?", (k,))
                sql(q, "DELETE FROM kernels WHERE id = ?", (k,))
        if named and rank in group:
            sql(q, "INSERT INTO meta (key, value) VALUES ('nccl.stream.14', ?)", ("sub:" + ",".join(map(str, group)),))
    return f"stream 14 over ranks {group}, "


def one(mhc, work, blank, rng, i, verbose):
    paths = outside.random_job(work, blank, rng, far=0.0)
    grouped = regroup(paths, rng) if rng.random() < 0.5 else ""
    kind = rng.choice(CHANGES)
    done = change(kind, paths, rng)
    while done is None:
        kind = rng.choice(CHANGES)
        done = change(kind, paths, rng)
    paths, note = done
    label = f"run {i}: {len(paths)} ranks, {grouped}{kind} {note}".rstrip()
    for q in paths:
        chk = subprocess.run([mhc, "check", str(q)], capture_output=True, text=True)
        if chk.returncode != 0:
            return label, None, [], "check"   # a change the trace format refuses (an access out of its lifetime)
    if rng.random() < 0.5:
        rng.shuffle(paths)
    refused, facts = ref.admit(paths)
    p = subprocess.run([mhc, "simulate", "--ranks"] + [str(q) for q in paths] +
                       ["--capacity", "unlimited", "--no-store", "--allocator", "ideal"],
                       capture_output=True, text=True)
    problems = []
    if refused is not None:
        label += f" (the documents: refused, {refused.kind}: {refused.why})"
        # the refusal's one line (a job without job keys has its warning line before it)
        lines = [x for x in p.stderr.splitlines() if x.strip() and not x.startswith("mhc: warning:")]
        if p.returncode != 2:
            problems.append(f"exit {p.returncode}, the documents refuse it")
        elif len(lines) != 1 or not any(Path(f).name in lines[0] for f in facts):
            problems.append(f"refused, not in one line naming {[Path(f).name for f in facts]}: "
                            f"{p.stderr.strip()[:300]}")
    else:
        label += " (the documents: simulated)"
        if p.returncode != 0:
            problems.append(f"exit {p.returncode}: {p.stderr.strip()[:300]}")
        else:
            said = "no meta job.id: the traces are taken to be the ranks of one job" in p.stderr
            if said != ("assumed one job" in facts):
                problems.append(f"the one-job warning said {said}, the documents {'assumed one job' in facts}")
            warned = "\n".join(x for x in p.stderr.splitlines() if x.startswith("mhc: warning:"))
            host = next((w[1] for w in facts if isinstance(w, tuple)), [])
            if ("kineto.host_collectives" in warned) != bool(host) or not all(h in warned for h in host):
                problems.append(f"the host collectives' warning: {warned[:300]!r}, the documents name {host}")
    if verbose:
        print(label, p.returncode, p.stderr.strip()[:200])
    return label, refused.kind if refused is not None else "simulated", problems, kind


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in sys.argv[1:] if a.startswith("--"))
    mhc, work = args[0], Path(args[1])
    work.mkdir(parents=True, exist_ok=True)
    blank = outside.empty_trace(mhc, work)
    runs = int(opts.get("runs", 100))
    bad, tally, skipped = 0, {}, 0
    for i in range(runs):
        rng = random.Random(f"{opts.get('seed', 1)}/{i}")
        if "only" in opts and int(opts["only"]) != i:
            continue
        job = work / f"job{i}"
        job.mkdir(exist_ok=True)
        label, verdict, problems, kind = one(mhc, job, blank, rng, i, "verbose" in opts)
        if verdict is None:
            skipped += 1
            continue
        tally[verdict] = tally.get(verdict, 0) + 1
        if problems:
            bad += 1
            print(f"DIFFER {label}")
            for q in problems:
                print(f"  {q}")
        if not problems and "keep" not in opts:
            for q in job.iterdir():
                q.unlink()
            job.rmdir()
    checked = runs - skipped if "only" not in opts else 1 - skipped
    print(f"{checked - bad} of {checked} jobs agree ({', '.join(f'{k} {v}' for k, v in sorted(tally.items()))}; "
          f"{skipped} changes refused by mhc check, not run)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
