"""PyTorch's caching allocator as docs/simulator.md ("Allocator models", `caching`) states it, with
its settings (`expandable_segments`, `max_split_size_mb`, `max_non_split_rounding_mb`,
`roundup_power2_divisions`, `garbage_collection_threshold`); written from the document alone for
reference_sim.py."""
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
            if size.strip() == ">":   # `>` covers the intervals after the last entry
                for i in range(last + 1, INTERVALS):
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


class Block:
    __slots__ = ("segment", "offset", "size", "free", "mapped", "cached_at")

    def __init__(self, segment, offset, size, free, mapped=True):
        self.segment, self.offset, self.size, self.free, self.mapped = segment, offset, size, free, mapped
        self.cached_at = 0


class Segment:
    __slots__ = ("id", "stream", "small", "size", "blocks", "expandable")

    def __init__(self, sid, stream, small, size, expandable=False):
        self.id, self.stream, self.small, self.size, self.expandable = sid, stream, small, size, expandable
        self.blocks = [Block(self, 0, size, True, not expandable)]


class CachingAllocator:
    def __init__(self, capacity, conf_text=""):
        self.capacity = capacity
        self.conf = Conf(conf_text)
        self.segments = []
        self.next_id = 0
        self.reserved = 0
        self.block_of = {}   # allocation -> Block
        self.large_searches = 0   # garbage collection's clock: searches of the large pool

    def round(self, n):
        return round_size(n, self.conf)

    def _page(self, small):
        return SMALL_SEGMENT if small else LARGE_SEGMENT

    def _should_split(self, block, size):
        rest = block.size - size
        if block.segment.small or self.conf.expandable:
            return rest >= MIN_BLOCK
        return size < self.conf.max_split and rest > SMALL_SIZE

    def _grow_size(self, seg, i):
        """A free block's size for best fit: with the unmapped space after it (expandable)."""
        b = seg.blocks[i]
        nxt = seg.blocks[i + 1] if i + 1 < len(seg.blocks) else None
        return b.size + (nxt.size if nxt is not None and not nxt.mapped else 0)

    def _best_fit(self, stream, small, size):
        """The smallest free block >= size (ties: segment, offset); with expandable segments, the
        walk to the next larger ones while they would grow to less; then the oversize rules."""
        c = self.conf
        fits = sorted((b.size, seg.id, b.offset, i, seg) for seg in self.segments
                      if seg.stream == stream and seg.small == small
                      for i, b in enumerate(seg.blocks) if b.free and b.mapped and b.size >= size)
        if not fits:
            return None
        j = 0
        if c.expandable:
            while j + 1 < len(fits) and self._grow_size(fits[j + 1][4], fits[j + 1][3]) < \
                    self._grow_size(fits[j][4], fits[j][3]):
                j += 1
        found, _, _, i, seg = fits[j]
        if size < c.max_split <= found:   # an oversize block serves only oversize requests
            return None
        if size >= c.max_split and found >= size + c.non_split_rounding:
            return None
        return seg.blocks[i]

    def _insert_after(self, block, new):
        seg = block.segment
        seg.blocks.insert(seg.blocks.index(block) + 1, new)

    def _take(self, block, size):
        if self._should_split(block, size):
            rest = Block(block.segment, block.offset + size, block.size - size, True)
            rest.cached_at = self.large_searches
            self._insert_after(block, rest)
            block.size = size
        block.free = False
        return block

    def _release_segment(self, seg):
        self.reserved -= seg.size
        self.segments.remove(seg)

    def _release_cached(self):
        """Every wholly free segment goes back to the GPU; expandable: whole pages in free blocks."""
        for seg in list(self.segments):
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
        while self.reserved > limit:
            whole = [seg for seg in self.segments if not seg.small and not seg.expandable and len(seg.blocks) == 1
                     and seg.blocks[0].free]
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
        seg = Segment(self.next_id, stream, small, space, expandable=True)
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
        for off, n in plan:
            if self.reserved + n > self.capacity:
                return False
            j = next(j for j, b in enumerate(seg.blocks) if b.offset == off)
            blk = seg.blocks[j]
            if n < blk.size:
                seg.blocks.insert(j + 1, Block(seg, blk.offset + n, blk.size - n, True, mapped=False))
                blk.size = n
            blk.mapped = True
            blk.cached_at = self.large_searches
            self.reserved += n
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
        return next(b for b in seg.blocks if b.offset == offset)

    # -- the interface reference_sim.py uses
    def _new_segment(self, stream, small, size):
        if small:
            seg_size = SMALL_SEGMENT
        elif size < MIN_LARGE_ALLOC:
            seg_size = LARGE_SEGMENT
        else:
            seg_size = ROUND_LARGE * math.ceil(size / ROUND_LARGE)
        if self.reserved + seg_size > self.capacity:
            return None
        seg = Segment(self.next_id, stream, small, seg_size)
        self.next_id += 1
        self.segments.append(seg)
        self.reserved += seg_size
        return seg.blocks[0]

    def _alloc_block(self, stream, small, size):
        if self.conf.expandable:
            return self._grow(stream, small, size)
        return self._new_segment(stream, small, size)

    def allocate(self, a, nbytes, stream):
        """Places allocation a; False when the capacity does not allow it (the simulator then evicts)."""
        size = self.round(nbytes)
        small = size <= SMALL_SIZE
        if not small:
            self.large_searches += 1
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
        i = seg.blocks.index(block)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].free and seg.blocks[i + 1].mapped:   # absorb neighbours
            block.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].free and seg.blocks[i - 1].mapped:
            prev = seg.blocks[i - 1]
            prev.size += block.size
            prev.cached_at = self.large_searches
            seg.blocks.pop(i)

    def largest_free_block(self):
        return max((b.size for seg in self.segments for b in seg.blocks if b.free and b.mapped), default=0)

    def block_bytes(self, a):
        return self.block_of[a].size
