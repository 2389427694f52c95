"""PyTorch's caching allocator as docs/simulator.md states it ("Allocator models", `caching`, and its
settings), read a third time by an outside tester from the document alone: not from sim/, not from
reference_caching.py (the second reading). Where the document names a PyTorch function and leaves a
case open, the comment says which reading of that function was taken.

Allocator(conf_text, capacity).malloc(nbytes, stream) returns a block (or None: the allocator cannot
place it, every retry done: the simulator would evict, rule 6); free(block); reserved is the
reserved (cudaMalloc'd or mapped) bytes. Standard library only."""

MIB = 1 << 20
PAGE_SMALL = 2 * MIB
PAGE_LARGE = 20 * MIB
UNLIMITED = 1 << 62
NO_SPLIT_LIMIT = 1 << 64


class ConfError(ValueError):
    pass


def is_pow2(v):
    return v > 0 and v & (v - 1) == 0


class Conf:
    def __init__(self, text=""):
        self.expandable = False
        self.max_split = NO_SPLIT_LIMIT          # bytes
        self.max_non_split_rounding = 20 * MIB   # bytes
        self.divisions = [0] * 16                # intervals 1 MiB .. 32 GiB
        self.gc = 0.0
        self.update(text)

    def update(self, text):
        text = text.strip()
        if not text:
            return
        # split on commas outside brackets
        items, depth, cur = [], 0, ""
        for ch in text:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            if ch == "," and depth == 0:
                items.append(cur)
                cur = ""
            else:
                cur += ch
        items.append(cur)
        for item in items:
            key, _, val = item.partition(":")
            key, val = key.strip(), val.strip()
            if key == "expandable_segments":
                self.expandable = val == "True"
            elif key == "max_split_size_mb":
                n = int(val)
                if n < 20:   # "N ≥ 20, as torch 2.15 takes it"
                    raise ConfError(key)
                self.max_split = n * MIB
            elif key == "max_non_split_rounding_mb":
                self.max_non_split_rounding = int(val) * MIB
            elif key == "garbage_collection_threshold":
                x = float(val)
                if not 0 < x < 1:
                    raise ConfError(key)
                self.gc = x
            elif key == "roundup_power2_divisions":
                if val.startswith("["):
                    first, last = True, 0
                    for pair in val[1:-1].split(","):
                        a, _, b = pair.partition(":")
                        d = int(b)
                        if a.strip() == ">":
                            # `>` sets the last entry's interval and every one after it (none before it:
                            # all of them), as PyTorch's parseRoundUpPower2Divisions fills from last_index
                            for i in range(last, 16):
                                self.divisions[i] = d
                        else:
                            mb = int(a)
                            idx = mb.bit_length() - 1
                            if first:   # "the first entry also covers the intervals below it"
                                for i in range(idx):
                                    self.divisions[i] = d
                                first = False
                            self.divisions[idx] = d
                            last = idx
                else:
                    self.divisions = [int(val)] * 16


class Seg:
    def __init__(self, sid, pool, size, expandable):
        self.id, self.pool, self.size, self.expandable = sid, pool, size, expandable
        self.blocks = []   # address order


class Block:
    __slots__ = ("seg", "off", "size", "state", "base")

    def __init__(self, seg, off, size, state):
        self.seg, self.off, self.size, self.state = seg, off, size, state   # state: free, used, unmapped
        self.base = 0   # the pool's search count when it was cached (garbage collection's age)

    def idx(self):
        return self.seg.blocks.index(self)

    def prev(self):
        i = self.idx()
        return self.seg.blocks[i - 1] if i > 0 else None

    def next(self):
        i = self.idx()
        return self.seg.blocks[i + 1] if i + 1 < len(self.seg.blocks) else None


class Allocator:
    def __init__(self, conf="", capacity=UNLIMITED):
        self.conf = conf if isinstance(conf, Conf) else Conf(conf)
        self.capacity = capacity
        self.limited = capacity < UNLIMITED
        self.segs = []       # live segments
        self.next_id = 0
        self.reserved = 0
        self.held = 0        # reserved bytes in no segment (a profiler's first figure: top_up)
        self.searches = 0    # searches of the large pool (garbage collection's clock)
        self.mallocs = 0     # cudaMalloc / map calls
        self.frees = 0       # cudaFree / unmap calls

    def top_up(self, figure):
        """Reserved topped up to a profiler's figure (at most the capacity) with held bytes."""
        add = max(0, min(figure, self.capacity) - self.reserved)
        self.held += add
        self.reserved += add

    def draw(self, n):
        """New device memory for a segment or pages: held bytes first, the rest within the capacity."""
        h = min(self.held, n)
        if self.reserved - h + n > self.capacity:
            return False
        self.held -= h
        self.reserved += n - h
        return True

    def give_back_held(self):
        self.reserved -= self.held
        self.held = 0

    # sizes ----------------------------------------------------------------------------------------
    def round_size(self, n):
        if n < 512:
            return 512
        log = n.bit_length() - 1
        idx = min(max(log - 20, 0), 15)
        d = self.conf.divisions[idx]
        if d > 1 and n > 512 * d:
            if is_pow2(n):
                return n
            floor = 1 << log
            step = floor >> (d.bit_length() - 1)
            if step == 0:
                return floor << 1
            low = n & ~(step - 1)
            return n if low == n else low + step
        return (n + 511) // 512 * 512

    @staticmethod
    def segment_size(rsize):
        if rsize <= MIB:
            return 2 * MIB
        if rsize < 10 * MIB:
            return 20 * MIB
        return (rsize + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)

    # pools ----------------------------------------------------------------------------------------
    def free_blocks(self, pool):
        out = [b for s in self.segs if s.pool == pool for b in s.blocks if b.state == "free"]
        out.sort(key=lambda b: (b.size, b.seg.id, b.off))
        return out

    def cache(self, b):
        b.state = "free"
        b.base = self.searches

    # malloc ---------------------------------------------------------------------------------------
    def malloc(self, nbytes, stream=0, private=""):
        """private: a private pool's id (a CUDA graph's or a MemPool's), "" for the default pool."""
        rsize = self.round_size(nbytes)
        small = rsize <= MIB
        pool = (stream, small, private)
        if not small and not private:   # garbage collection ages by the default large pool's searches
            self.searches += 1
        b = self.get_free_block(pool, rsize)
        if b is None:
            if self.limited and self.conf.gc > 0:
                self.garbage_collect()
            b = self.alloc_block(pool, rsize)
            if b is None and self.release_available(pool, rsize):
                b = self.alloc_block(pool, rsize)
            if b is None:
                self.release_cached()
                b = self.alloc_block(pool, rsize)
            if b is None:
                return None
        return self.take(b, rsize)

    def get_free_block(self, pool, rsize):
        blocks = self.free_blocks(pool)
        i = next((k for k, b in enumerate(blocks) if b.size >= rsize), None)
        if i is None:
            return None
        if self.conf.expandable:
            def grow(b):
                n = b.next()
                return b.size + (n.size if n is not None and n.state == "unmapped" else 0)
            while blocks[i].seg.expandable and i + 1 < len(blocks) and grow(blocks[i + 1]) < grow(blocks[i]):
                i += 1
        b = blocks[i]
        ms = self.conf.max_split
        if rsize < ms and b.size >= ms:
            return None
        if rsize >= ms and b.size >= rsize + self.conf.max_non_split_rounding:
            return None
        return b

    def take(self, b, rsize):
        rest = b.size - rsize
        small = b.seg.pool[1]
        if small or self.conf.expandable:
            split = rest >= 512
        else:
            split = rsize < self.conf.max_split and rest > MIB
        if split:
            i = b.idx()
            r = Block(b.seg, b.off + rsize, rest, "free")
            b.seg.blocks.insert(i + 1, r)
            b.size = rsize
            self.cache(r)
        b.state = "used"
        return b

    def alloc_block(self, pool, rsize):
        if self.conf.expandable:
            return self.alloc_expandable(pool, rsize)
        size = self.segment_size(rsize)
        if not self.draw(size):
            return None
        seg = Seg(self.next_id, pool, size, False)
        self.next_id += 1
        self.segs.append(seg)
        b = Block(seg, 0, size, "free")
        seg.blocks.append(b)
        self.mallocs += 1
        return b

    # expandable segments ---------------------------------------------------------------------------
    def page(self, pool):
        return PAGE_SMALL if pool[1] else PAGE_LARGE

    def alloc_expandable(self, pool, rsize):
        cand = self.find_expandable(pool, rsize)
        if cand.state == "unmapped":
            cand = self.map(cand, min(cand.size, rsize))
            if cand is None:
                return None
        while cand.size < rsize:
            nxt = cand.next()
            cand = self.map(nxt, min(rsize - cand.size, nxt.size))
            if cand is None:
                return None
        return cand

    def find_expandable(self, pool, rsize):
        def room(b):
            n = 0
            while n < rsize and b is not None and b.state != "used":
                n += b.size
                b = b.next()
            return n >= rsize
        ranges = [b for s in self.segs if s.pool == pool and s.expandable for b in s.blocks if b.state == "unmapped"]
        ranges.sort(key=lambda b: (b.seg.id, b.off))
        for c in ranges:
            p = c.prev()
            if p is not None and p.state == "free":
                c = p
            if room(c):
                return c
        page = self.page(pool)
        cap = self.capacity
        space = (cap + cap // 8 + page - 1) // page * page
        seg = Seg(self.next_id, pool, space, True)
        self.next_id += 1
        self.segs.append(seg)
        b = Block(seg, 0, space, "unmapped")
        seg.blocks.append(b)
        return b

    def map(self, b, size):
        """Maps the whole pages of unmapped range b that size needs; returns the merged free block."""
        page = self.page(b.seg.pool)
        n = (size + page - 1) // page * page
        n = min(n, b.size)
        if not self.draw(n):
            return None
        self.mallocs += 1
        i = b.idx()
        if n < b.size:
            rest = Block(b.seg, b.off + n, b.size - n, "unmapped")
            b.seg.blocks.insert(i + 1, rest)
            b.size = n
        self.cache(b)
        return self.merge(b)

    def merge(self, b):
        """b is free: absorbs free neighbours of its segment (and is cached anew)."""
        p = b.prev()
        if p is not None and p.state == "free":
            b.seg.blocks.remove(p)
            b.off, b.size = p.off, p.size + b.size
        n = b.next()
        if n is not None and n.state == "free":
            b.seg.blocks.remove(n)
            b.size += n.size
        self.cache(b)
        return b

    def merge_unmapped(self, b):
        p = b.prev()
        if p is not None and p.state == "unmapped":
            b.seg.blocks.remove(p)
            b.off, b.size = p.off, p.size + b.size
        n = b.next()
        if n is not None and n.state == "unmapped":
            b.seg.blocks.remove(n)
            b.size += n.size

    def unmap(self, b):
        page = self.page(b.seg.pool)
        lo = (b.off + page - 1) // page * page
        hi = (b.off + b.size) // page * page
        if lo >= hi:
            return
        i = b.idx()
        end = b.off + b.size
        new = []
        if lo > b.off:
            before = Block(b.seg, b.off, lo - b.off, "free")
            before.base = b.base
            new.append(before)
        mid = Block(b.seg, lo, hi - lo, "unmapped")
        new.append(mid)
        if end > hi:
            after = Block(b.seg, hi, end - hi, "free")
            after.base = b.base
            new.append(after)
        b.seg.blocks[i:i + 1] = new
        for x in new:
            if x.state == "free":
                self.cache(x)
        self.reserved -= hi - lo
        self.frees += 1
        self.merge_unmapped(mid)
        if len(b.seg.blocks) == 1 and b.seg.blocks[0].state == "unmapped":
            self.segs.remove(b.seg)

    # giving back ----------------------------------------------------------------------------------
    def release_segment(self, seg):
        self.segs.remove(seg)
        self.reserved -= seg.size
        self.frees += 1

    def release_available(self, pool, rsize):
        ms = self.conf.max_split
        if ms == NO_SPLIT_LIMIT:
            return False
        key = max(rsize, ms)
        blocks = self.free_blocks(pool)
        i = next((k for k, b in enumerate(blocks) if b.size >= key), None)
        if i is not None and not blocks[i].seg.expandable:
            self.release_segment(blocks[i].seg)
            return True
        # from the largest down (below the lower bound), oversize ones only
        j = (len(blocks) if i is None else i) - 1
        if j < 0:
            return False
        released = 0
        while j >= 0 and released < key and blocks[j].size >= ms:
            b = blocks[j]
            if not b.seg.expandable:
                self.release_segment(b.seg)
                released += b.size
            j -= 1
        return released >= key

    def release_cached(self):
        """The default pool's cache (a private pool's memory is not given back by it)."""
        self.give_back_held()
        for seg in list(self.segs):
            if seg.expandable or seg.pool[2]:
                continue
            if len(seg.blocks) == 1 and seg.blocks[0].state == "free":
                self.release_segment(seg)
        frees = [b for s in self.segs if s.expandable and not s.pool[2] for b in s.blocks if b.state == "free"]
        for b in frees:
            if b.seg in self.segs:
                self.unmap(b)

    def garbage_collect(self):
        thr = int(self.conf.gc * self.capacity)
        if self.reserved <= thr:
            return
        # the held bytes first, only down to the threshold (docs/simulator.md, "Start from a
        # profiler's figure"; the document said "as are ... garbage collection" before 2026-12-05)
        back = min(self.held, self.reserved - thr)
        self.held -= back
        self.reserved -= back
        if self.reserved <= thr:
            return
        target = self.reserved - thr
        large = [b for s in self.segs if not s.pool[1] and not s.pool[2] for b in s.blocks if b.state == "free"]
        whole = [b for b in large if len(b.seg.blocks) == 1]
        total = sum(self.searches - b.base for b in whole)
        count = len(whole)
        if count == 0:
            return
        got, freed = 0, True
        while got < target and freed and count > 0:
            avg = total / count
            freed = False
            for b in list(whole):
                if not b.seg.expandable and self.searches - b.base >= avg:
                    freed = True
                    got += b.size
                    total -= self.searches - b.base
                    count -= 1
                    whole.remove(b)
                    self.release_segment(b.seg)

    # free -----------------------------------------------------------------------------------------
    def free(self, b):
        self.merge(b)
