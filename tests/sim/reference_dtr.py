"""The sampled policies `dtr` and `cost_aware` and the recomputation of dropped allocations, as
docs/simulator.md states them ("Eviction policies": the sampled policies, exactly; rule 2's
dropped operands; rule 5's drop), written from the document alone: a mixin of reference_sim.Sim."""
import math

# states (docs/simulator.md, "State")
NOT_YET, GPU, HOST, H2D, D2H, FREED, DROPPED = range(7)

SAMPLES = 64
SEED = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1
MAX_DEPTH = 32
NEVER_TTNU = 1e18
ACTIVATION = 3   # allocations.category


def xorshift64(x):
    x ^= (x << 13) & MASK
    x ^= x >> 7
    return x ^ ((x << 17) & MASK)


def swap_remove(items, pos, a):
    """Removes a from the list by moving the last entry into its place (pos: item -> index)."""
    i = pos.pop(a, None)
    if i is None:
        return
    last = items.pop()
    if last != a:
        items[i] = last
        pos[last] = i


class SampledPolicies:
    """Needs from Sim: tr, state, pins, link, shift, policy, host_valid, events, m, make_room,
    start_transfer, complete_by, set_state, note_used, place, evictable, producer, last_use."""

    def init_sampled(self):
        self.sampled = self.policy in ("dtr", "cost_aware")
        self.elist, self.epos = [], {}
        self.x = SEED
        self.last_started = 0   # seq of the kernel started last (the first before any)
        self.any_started = False
        self.m.update(recompute_depth_max=0, recompute_inputs_assumed=0, drops=0, recomputations=0, recompute_ns=0)

    # -- the evictable list: appended to, removed from by moving the last entry into the place
    def list_add(self, a):
        if a not in self.epos:
            self.epos[a] = len(self.elist)
            self.elist.append(a)

    def list_remove(self, a):
        swap_remove(self.elist, self.epos, a)

    def draw(self):
        self.x = xorshift64(self.x)
        return self.x

    # -- costs (doubles)
    def swap_cost(self, a, to_gpu):
        b = self.tr.allocs[a][2]
        lk = self.link
        lat, bw = (lk.h2d_latency_s, lk.h2d_bps) if to_gpu else (lk.d2h_latency_s, lk.d2h_bps)
        return lat * 1e9 + b * (1e9 / bw)   # nanoseconds per byte first: equal costs per byte tie exactly

    def recompute_cost(self, a):
        """The producer's recorded duration, when it can be rerun at a's next use; else infinite."""
        tr = self.tr
        p = self.producer[a]
        if p is None or tr.categories[a] != ACTIVATION:
            return math.inf
        nu = self.next_use_now(a)
        if nu < len(tr.kernels):   # never used again: nothing to wait for
            t_next = tr.kernels[nu][2]
            for o, _ in tr.operands[p]:
                if o != a and tr.allocs[o][4] is not None and tr.allocs[o][4] <= t_next:
                    return math.inf
        k = tr.kernels[p]
        return float(k[3] - k[2])

    def next_use_now(self, a):
        """The first kernel after the one started last that accesses a (its first use before any)."""
        return self.next_use_after(a, self.last_started if self.any_started else -1)

    def drops(self, a):
        r = self.recompute_cost(a)
        if math.isinf(r):
            return False
        if self.policy == "dtr":
            return r <= self.swap_cost(a, False) + self.swap_cost(a, True)
        return r < self.swap_cost(a, True)

    def score(self, a, now):
        b = self.tr.allocs[a][2]
        r = self.recompute_cost(a)
        if self.policy == "dtr":
            cost = min(r, self.swap_cost(a, False) + self.swap_cost(a, True))
            return -cost / (b * (now - self.last_use[a] + 1))
        tr = self.tr
        nu = self.next_use_now(a)
        ttnu = NEVER_TTNU if nu >= len(tr.kernels) else max(1, tr.kernels[nu][2] - tr.kernels[self.last_started][2])
        reload = max(1.0, min(self.swap_cost(a, True), r))
        # the D2H queue's end (the queue both directions share with one copy engine): the last
        # swap-out's end until 2026-12-06, which missed the swap-ins queued before a swap-out
        backlog = max(0, self.queue_free[self.link.copy_engines == 1] - now)
        hide = 1.0 if ttnu >= backlog + self.swap_cost(a, False) + reload else 0.1
        return ttnu / reload * hide * (1.25 - self.depth(a) / 2)

    def depth(self, a):
        p = self.producer[a]
        if p is None:
            return 0.5
        step = self.tr.kernel_steps[p]
        first, count = self.tr.step_span.get(step, (None, 0))
        if step < 0 or not count:
            return 0.5
        return (p - first) / count

    def sampled_pick(self, now):
        n = len(self.elist)
        if n == 0:
            return None
        picks = self.elist if n <= SAMPLES else [self.elist[self.draw() % n] for _ in range(SAMPLES)]
        best = None
        for a in picks:
            k = (self.score(a, now), -a)
            if best is None or k > best:
                best = k
        return -best[1]

    def sampled_victim(self, aside, window, now):
        while True:
            a = self.sampled_pick(now)
            if a is None:
                return None
            if window and a in self.protected:
                return None
            b = self.tr.allocs[a][2]
            if self.host_valid[a] or self.drops(a) or self.host_room(b):
                return a
            self.list_remove(a)
            aside[a] = True

    def drop(self, v, t):
        b = self.tr.allocs[v][2]
        self.set_state(v, DROPPED)
        self.release(v)
        self.m["drops"] += 1
        self.events.append(("drop", t, t, v, None, b))

    # -- rule 2: a dropped operand is recomputed, recursively
    def recompute(self, a, now, gpu_free, depth, chain):
        """Brings a back by rerunning its producer; returns (ready, now, gpu_free) or None (OOM)."""
        tr = self.tr
        self.m["recompute_depth_max"] = max(self.m["recompute_depth_max"], depth)
        p = self.producer[a]
        ready = now
        chain = chain | {a}
        for i, mode in tr.operands[p]:
            if i == a or not mode & 1:
                continue
            self.pins[i] += 1   # every input, whatever its state
            self.list_remove(i)
            self.recompute_pins.append(i)
            st = self.state[i]
            if st == FREED or i in chain or (st == DROPPED and depth + 1 > MAX_DEPTH):
                self.m["recompute_inputs_assumed"] += 1
                continue
            if st == H2D:
                ready = max(ready, self.transfer[i].end)
            elif st == D2H:
                now = max(now, self.transfer[i].end)
                self.complete_by(now)
                st = self.state[i]
            if st == HOST:
                now = self.make_room(i, now)
                if now is None:
                    return None
                self.set_state(i, H2D)
                tf = self.start_transfer(i, True, now)
                self.note_used()
                ready = max(ready, tf.end)
            elif st == DROPPED:
                got = self.recompute(i, now, gpu_free, depth + 1, chain)
                if got is None:
                    return None
                r, now, gpu_free = got
                ready = max(ready, r)
        now = self.make_room(a, now)
        if now is None:
            return None
        self.set_state(a, GPU)
        self.note_used()
        k = tr.kernels[p]
        begin = max(ready, gpu_free, now)
        end = begin + (k[3] - k[2])
        self.m["recomputations"] += 1
        self.m["recompute_ns"] += end - begin
        self.events.append(("recompute", begin, end, a, None, tr.allocs[a][2]))
        return end, now, end

