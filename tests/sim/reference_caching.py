"""PyTorch's caching allocator as docs/simulator.md ("Allocator models", `caching`) states it, with
its settings (`expandable_segments`, `max_split_size_mb`, `max_non_split_rounding_mb`,
`roundup_power2_divisions`, `garbage_collection_threshold`); written from the document alone for
reference_sim.py.

Best fit keeps, per pool (stream, small or large), the free mapped blocks in a list sorted by
(size, segment, offset): a bisection finds the smallest that fits instead of sorting every free
block on each request. Each block remembers the entry it has there (`key`), and every change to a
block's size, state or place updates it (_index, _unindex, _reindex)."""
import bisect
import operator
import math

MIB = 1 << 20
SMALL_SIZE = MIB              # requests of at most 1 MiB go to the small pool
MIN_BLOCK = 512
SMALL_SEGMENT = 2 * MIB
LARGE_SEGMENT = 20 * MIB      # for large requests under 10 MiB
MIN_LARGE_ALLOC = 10 * MIB
ROUND_LARGE = 2 * MIB
INTERVALS = 16                # roundup intervals: the powers of two from 1 MiB to 32 GiB
NO_LIMIT = 1 << 62


class Conf:
    """The settings, parsed from PYTORCH_CUDA_ALLOC_CONF text (key:value,...)."""

    def __init__(self, text=""):
        self.expandable = False
        self.max_split = NO_LIMIT
        self.non_split_rounding = 20 * MIB
        self.divisions = [0] * INTERVALS
        self.gc_threshold = 0.0
        for key, value in split_pairs(text):
            if key == "expandable_segments":
                self.expandable = value == "True"
            elif key == "max_split_size_mb":
                self.max_split = int(value) * MIB
            elif key == "max_non_split_rounding_mb":
                self.non_split_rounding = int(value) * MIB
            elif key == "garbage_collection_threshold":
                self.gc_threshold = float(value)
            elif key == "roundup_power2_divisions":
                self.parse_divisions(value)

    def parse_divisions(self, value):
        if not value.startswith("["):
            self.divisions = [int(value)] * INTERVALS
            return
        first, last = True, 0   # intervals the list does not name keep their value (0: plain rounding)
        for entry in value.strip("[]").split(","):
            size, div = entry.split(":")
            if size.strip() == ">":   # `>` covers the last entry's interval (overwritten) and those after it
                for i in range(last, INTERVALS):
                    self.divisions[i] = int(div)
                continue
            i = min(int(math.log2(int(size))), INTERVALS - 1)
            if first:   # the first entry also covers the intervals below it
                for j in range(i):
                    self.divisions[j] = int(div)
                first = False
            self.divisions[i] = int(div)
            last = i


def split_pairs(text):
    """key:value pairs separated by commas, a bracketed list counting as one value."""
    out, depth, cur = [], 0, ""
    for ch in text + ",":
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            if cur.strip():
                key, value = cur.split(":", 1)
                out.append((key.strip(), value.strip()))
            cur = ""
        else:
            cur += ch
    return out


def round_size(n, conf=None):
    if n < MIN_BLOCK:
        return MIN_BLOCK
    if conf is not None:
        interval = min(max(n.bit_length() - 1 - 20, 0), INTERVALS - 1)
        d = conf.divisions[interval]
        if d > 1 and n > MIN_BLOCK * d:
            floor = 1 << (n.bit_length() - 1)
            if floor == n:
                return n
            step = floor // d
            return (n // step) * step + (0 if n % step == 0 else step)
    return MIN_BLOCK * math.ceil(n / MIN_BLOCK)


_OFFSET = operator.attrgetter("offset")


def _position(blocks, block):
    """block's index in its segment's list, whose blocks lie in address order (each new one next to
    the one it was cut from): found by its offset."""
    i = bisect.bisect_left(blocks, block.offset, key=_OFFSET)
    return i if i < len(blocks) and blocks[i] is block else blocks.index(block)


class Block:
    __slots__ = ("segment", "offset", "size", "free", "mapped", "cached_at", "key")

    def __init__(self, segment, offset, size, free, mapped=True):
        self.segment, self.offset, self.size, self.free, self.mapped = segment, offset, size, free, mapped
        self.cached_at = 0
        self.key = None   # its entry (size, segment id, offset, block) in the pool's free list, if any


class Segment:
    __slots__ = ("id", "stream", "small", "size", "blocks", "expandable", "free_list", "private")

    def __init__(self, sid, stream, small, size, expandable=False, free_list=None):
        # stream: the allocation's stream, or (stream, pool id) in a private pool (docs/simulator.md:
        # a private pool keeps its own small and large pools per stream)
        self.id, self.stream, self.small, self.size, self.expandable = sid, stream, small, size, expandable
        self.private = isinstance(stream, tuple)
        self.blocks = [Block(self, 0, size, True, not expandable)]
        self.free_list = free_list   # its pool's (CachingAllocator.free_lists)


class CachingAllocator:
    def __init__(self, capacity, conf_text=""):
        self.capacity = capacity
        self.conf = Conf(conf_text)
        self.segments = []
        self.next_id = 0
        self.reserved = 0
        self.held = 0   # reserved, in no segment (docs/simulator.md, "Start from a profiler's figure")
        self.block_of = {}   # allocation -> Block
        self.large_searches = 0   # garbage collection's clock: searches of the large pool
        self.free_lists = {}   # (stream, small) -> sorted [(size, segment id, offset, Block)], free and mapped
        self.rounded = {}   # request bytes -> rounded (round)

    # -- the free lists: every free mapped block of a live segment, and nothing else
    @staticmethod
    def _unindex(b):
        if b.key is not None:
            pool = b.segment.free_list
            del pool[bisect.bisect_left(pool, b.key)]   # entries are unique: (size, segment, offset)
            b.key = None

    @staticmethod
    def _index(b):
        """Brings b's entry up to date with its size and state (b a block of a live segment)."""
        key = b.key
        if b.free and b.mapped:
            if key is not None:
                if key[0] == b.size:
                    return
                pool = b.segment.free_list
                del pool[bisect.bisect_left(pool, key)]
            b.key = (b.size, b.segment.id, b.offset, b)
            bisect.insort(b.segment.free_list, b.key)
        elif key is not None:
            pool = b.segment.free_list
            del pool[bisect.bisect_left(pool, key)]
            b.key = None

    def _free_list(self, stream, small):
        return self.free_lists.setdefault((stream, small), [])

    def _reindex(self, seg, before):
        """After seg's block list changed from `before`: the blocks gone leave, the others update
        (_index on those whose entry is not what their size and state say)."""
        now = set(map(id, seg.blocks))
        for b in before:
            if b.key is not None and id(b) not in now:
                self._unindex(b)
        for b in seg.blocks:
            key = b.key
            if (key is not None or (b.free and b.mapped)) and (key is None or key[0] != b.size
                                                                 or not (b.free and b.mapped)):
                self._index(b)

    def round(self, n):
        """round_size under this allocator's settings (which never change), kept per size: a step's
        requests repeat a few sizes many times."""
        got = self.rounded.get(n)
        if got is None:
            got = self.rounded[n] = round_size(n, self.conf)
        return got

    def _page(self, small):
        return SMALL_SEGMENT if small else LARGE_SEGMENT

    def _should_split(self, block, size):
        rest = block.size - size
        if block.segment.small or self.conf.expandable:
            return rest >= MIN_BLOCK
        return size < self.conf.max_split and rest > SMALL_SIZE

    def _grow_size_of(self, b):
        """A free block's size for best fit: with the unmapped space after it (expandable)."""
        blocks = b.segment.blocks
        i = _position(blocks, b)
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        return b.size + (nxt.size if nxt is not None and not nxt.mapped else 0)

    def _best_fit(self, stream, small, size):
        """The smallest free block >= size (ties: segment, offset); with expandable segments, the
        walk to the next larger ones while they would grow to less; then the oversize rules."""
        c = self.conf
        fits = self.free_lists.get((stream, small), [])
        j = bisect.bisect_left(fits, (size,))   # the first entry of at least size bytes
        if j == len(fits):
            return None
        if c.expandable:
            grow = self._grow_size_of
            while j + 1 < len(fits) and grow(fits[j + 1][3]) < grow(fits[j][3]):
                j += 1
        found, _, _, block = fits[j]
        if size < c.max_split <= found:   # an oversize block serves only oversize requests
            return None
        if size >= c.max_split and found >= size + c.non_split_rounding:
            return None
        return block

    def _insert_after(self, block, new):
        seg = block.segment
        seg.blocks.insert(_position(seg.blocks, block) + 1, new)

    def _take(self, block, size):
        pool = block.segment.free_list
        del pool[bisect.bisect_left(pool, block.key)]   # a free block: it has its entry
        block.key = None
        if self._should_split(block, size):
            rest = Block(block.segment, block.offset + size, block.size - size, True)
            rest.cached_at = self.large_searches
            self._insert_after(block, rest)
            rest.key = (rest.size, rest.segment.id, rest.offset, rest)
            bisect.insort(pool, rest.key)
            block.size = size
        block.free = False
        return block

    def _release_segment(self, seg):
        self.reserved -= seg.size
        self.segments.remove(seg)
        for b in seg.blocks:
            self._unindex(b)

    def top_up(self, nbytes):
        """The warm start: reserved topped up to nbytes (at most the capacity) with held bytes."""
        add = min(nbytes, self.capacity) - self.reserved
        if add > 0:
            self.held += add
            self.reserved += add

    def _draw(self, n):
        """New device memory of n bytes: the held bytes first, the rest within the capacity."""
        from_held = min(self.held, n)
        if n - from_held > self.capacity - self.reserved:
            return False
        self.held -= from_held
        self.reserved += n - from_held
        return True

    def _release_cached(self):
        """Every wholly free segment goes back to the GPU; expandable: whole pages in free blocks.
        The held bytes are free memory too: they go first."""
        self.reserved -= self.held
        self.held = 0
        for seg in list(self.segments):
            if seg.private:   # a private pool's memory stays (the program has not let go of it)
                continue
            if seg.expandable:
                self._unmap_free(seg)
            elif len(seg.blocks) == 1 and seg.blocks[0].free:
                self._release_segment(seg)

    def release_pool(self, pool):
        """A private pool given back (its CUDA graph or torch.cuda.MemPool let go of): its wholly free
        segments go, and the free whole pages of its expandable ones, as empty_cache's of the
        default pool."""
        for seg in list(self.segments):
            if not (seg.private and seg.stream[1] == pool):
                continue
            if seg.expandable:
                self._unmap_free(seg)
            elif len(seg.blocks) == 1 and seg.blocks[0].free:
                self._release_segment(seg)

    def _release_oversize(self, stream, small, size):
        """max_split_size_mb: one cached oversize block >= max(request, N), else the largest down;
        True when that much was given back."""
        c = self.conf
        if c.max_split == NO_LIMIT or c.expandable:
            return False
        key = max(size, c.max_split)
        whole = sorted((seg.size, seg.id, seg) for seg in self.segments
                       if seg.stream == stream and seg.small == small and len(seg.blocks) == 1
                       and seg.blocks[0].free and seg.size >= c.max_split)
        fits = [w for w in whole if w[0] >= key]
        if fits:
            self._release_segment(fits[0][2])
            return True
        released = 0
        for w in reversed(whole):
            if released >= key:
                break
            self._release_segment(w[2])
            released += w[0]
        return released >= key

    def _collect_garbage(self):
        """garbage_collection_threshold: whole large-pool free blocks of at least the average age."""
        c = self.conf
        limit = int(c.gc_threshold * self.capacity)
        if c.gc_threshold <= 0 or self.reserved <= limit:
            return
        back = min(self.held, self.reserved - limit)   # the oldest free memory: first
        self.held -= back
        self.reserved -= back
        while self.reserved > limit:
            whole = [seg for seg in self.segments if not seg.small and not seg.expandable and not seg.private
                     and len(seg.blocks) == 1 and seg.blocks[0].free]
            if not whole:
                return
            ages = [self.large_searches - seg.blocks[0].cached_at for seg in whole]
            average = sum(ages) / len(ages)
            for seg, age in zip(whole, ages):
                if age >= average:
                    self._release_segment(seg)

    # -- expandable segments
    def _new_expandable_segment(self, stream, small):
        page = self._page(small)
        space = math.ceil((self.capacity + self.capacity // 8) / page) * page
        seg = Segment(self.next_id, stream, small, space, True, self._free_list(stream, small))
        self.next_id += 1
        self.segments.append(seg)
        return seg

    def _map_plan(self, seg, size):
        """The lowest unmapped range (joined with the free block before it) whose run of free and
        unmapped blocks holds size: (index of its first block, [(unmapped block index, bytes to map)])."""
        page = self._page(seg.small)
        for i, b in enumerate(seg.blocks):
            if b.mapped:
                continue
            start = i - 1 if i > 0 and seg.blocks[i - 1].free and seg.blocks[i - 1].mapped else i
            have, plan = 0, []
            for j in range(start, len(seg.blocks)):
                blk = seg.blocks[j]
                if have >= size or not blk.free:
                    break
                if blk.mapped:
                    have += blk.size
                else:
                    n = min(blk.size, page * math.ceil((size - have) / page))
                    plan.append((blk.offset, n))
                    have += blk.size if n == blk.size else n
            if have >= size:
                return start, plan
        return None, None

    def _map(self, seg, plan):
        """Maps the plan's ranges one after another; False at the first the capacity refuses (the
        pages mapped before it stay mapped)."""
        before = list(seg.blocks)
        try:
            return self._map_ranges(seg, plan)
        finally:
            self._reindex(seg, before)

    def _map_ranges(self, seg, plan):
        for off, n in plan:
            if not self._draw(n):
                return False
            j = bisect.bisect_left(seg.blocks, off, key=_OFFSET)   # the block at that offset
            assert seg.blocks[j].offset == off
            blk = seg.blocks[j]
            if n < blk.size:
                seg.blocks.insert(j + 1, Block(seg, blk.offset + n, blk.size - n, True, mapped=False))
                blk.size = n
            blk.mapped = True
            blk.cached_at = self.large_searches
            self._merge_all(seg)
        return True

    def _merge_all(self, seg):
        out = []
        for b in seg.blocks:
            if out and b.free and out[-1].free and b.mapped == out[-1].mapped:
                out[-1].size += b.size
            else:
                out.append(b)
        seg.blocks = out

    def _unmap_free(self, seg):
        before = list(seg.blocks)
        self._unmap_free_pages(seg)
        self._reindex(seg, before)

    def _unmap_free_pages(self, seg):
        page = self._page(seg.small)
        out = []
        for b in seg.blocks:
            if not (b.free and b.mapped):
                out.append(b)
                continue
            lo = page * math.ceil(b.offset / page)
            hi = page * ((b.offset + b.size) // page)
            if hi <= lo:
                out.append(b)
                continue
            if lo > b.offset:
                out.append(Block(seg, b.offset, lo - b.offset, True))
            out.append(Block(seg, lo, hi - lo, True, mapped=False))
            if b.offset + b.size > hi:
                out.append(Block(seg, hi, b.offset + b.size - hi, True))
            self.reserved -= hi - lo
        seg.blocks = out
        self._merge_all(seg)
        if all(not b.mapped for b in seg.blocks):
            self.segments.remove(seg)

    def _grow(self, stream, small, size):
        """Maps pages for size; the free block that then holds it, or None."""
        start = None
        for seg in [sg for sg in self.segments if sg.stream == stream and sg.small == small]:
            start, plan = self._map_plan(seg, size)
            if start is not None:
                break
        if start is None:   # a new segment's address space
            seg = self._new_expandable_segment(stream, small)
            start, plan = self._map_plan(seg, size)
            if start is None:
                return None
        offset = seg.blocks[start].offset
        if not self._map(seg, plan):
            return None
        found = seg.blocks[bisect.bisect_left(seg.blocks, offset, key=_OFFSET)]
        assert found.offset == offset
        return found

    # -- the interface reference_sim.py uses
    def _new_segment(self, stream, small, size):
        if small:
            seg_size = SMALL_SEGMENT
        elif size < MIN_LARGE_ALLOC:
            seg_size = LARGE_SEGMENT
        else:
            seg_size = ROUND_LARGE * math.ceil(size / ROUND_LARGE)
        if not self._draw(seg_size):
            return None
        seg = Segment(self.next_id, stream, small, seg_size, False, self._free_list(stream, small))
        self.next_id += 1
        self.segments.append(seg)
        self._index(seg.blocks[0])
        return seg.blocks[0]

    def _alloc_block(self, stream, small, size):
        if self.conf.expandable:
            return self._grow(stream, small, size)
        return self._new_segment(stream, small, size)

    def allocate(self, a, nbytes, stream, pool=None):
        """Places allocation a, in private pool `pool` (None: the default pool); False when the
        capacity does not allow it (the simulator then evicts)."""
        size = self.round(nbytes)
        small = size <= SMALL_SIZE
        if not small and pool is None:   # the clock is the default large pool's searches
            self.large_searches += 1
        if pool is not None:
            stream = (stream, pool)
        block = self._best_fit(stream, small, size)
        if block is None:
            self._collect_garbage()
            block = self._alloc_block(stream, small, size)
            if block is None and self._release_oversize(stream, small, size):
                block = self._alloc_block(stream, small, size)
            if block is None:
                self._release_cached()
                block = self._alloc_block(stream, small, size)
            if block is None:
                return False
        self.block_of[a] = self._take(block, size)
        return True

    def free(self, a):
        block = self.block_of.pop(a)
        block.free = True
        block.cached_at = self.large_searches
        seg = block.segment
        i = _position(seg.blocks, block)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].free and seg.blocks[i + 1].mapped:   # absorb neighbours
            nxt = seg.blocks.pop(i + 1)
            self._unindex(nxt)
            block.size += nxt.size
        if i > 0 and seg.blocks[i - 1].free and seg.blocks[i - 1].mapped:
            prev = seg.blocks[i - 1]
            prev.size += block.size
            prev.cached_at = self.large_searches
            seg.blocks.pop(i)
            self._index(prev)
        else:
            self._index(block)

    def largest_free_block(self):
        return max((pool[-1][0] for pool in self.free_lists.values() if pool), default=0)

    def block_bytes(self, a):
        return self.block_of[a].size
