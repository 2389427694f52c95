"""PyTorch's caching allocator as docs/simulator.md ("Allocator models", `caching`) states it, with
its default settings; written from the document alone for reference_sim.py."""
import math

SMALL_SIZE = 1 << 20          # requests of at most 1 MiB go to the small pool
MIN_BLOCK = 512
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20      # for large requests under 10 MiB
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


def round_size(n):
    return MIN_BLOCK if n < MIN_BLOCK else MIN_BLOCK * math.ceil(n / MIN_BLOCK)


class Block:
    __slots__ = ("segment", "offset", "size", "free")

    def __init__(self, segment, offset, size, free):
        self.segment, self.offset, self.size, self.free = segment, offset, size, free


class Segment:
    __slots__ = ("id", "stream", "small", "size", "blocks")

    def __init__(self, sid, stream, small, size):
        self.id, self.stream, self.small, self.size = sid, stream, small, size
        self.blocks = [Block(self, 0, size, True)]


class CachingAllocator:
    def __init__(self, capacity):
        self.capacity = capacity
        self.segments = []
        self.next_id = 0
        self.reserved = 0
        self.block_of = {}   # allocation -> Block

    def _should_split(self, block, size):
        rest = block.size - size
        return rest >= MIN_BLOCK if block.segment.small else rest > SMALL_SIZE

    def _best_fit(self, stream, small, size):
        best = None
        for seg in self.segments:
            if seg.stream != stream or seg.small != small:
                continue
            for b in seg.blocks:
                if b.free and b.size >= size:
                    k = (b.size, seg.id, b.offset)
                    if best is None or k < best[0]:
                        best = (k, b)
        return best[1] if best else None

    def _take(self, block, size):
        seg = block.segment
        if self._should_split(block, size):
            i = seg.blocks.index(block)
            seg.blocks.insert(i + 1, Block(seg, block.offset + size, block.size - size, True))
            block.size = size
        block.free = False
        return block

    def _release_cached(self):
        """Every wholly free segment goes back to the GPU."""
        keep = []
        for seg in self.segments:
            if len(seg.blocks) == 1 and seg.blocks[0].free:
                self.reserved -= seg.size
            else:
                keep.append(seg)
        self.segments = keep

    def allocate(self, a, nbytes, stream):
        """Places allocation a; False when the capacity does not allow it (the simulator then evicts)."""
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        block = self._best_fit(stream, small, size)
        if block is None:
            if small:
                seg_size = SMALL_SEGMENT
            elif size < MIN_LARGE_ALLOC:
                seg_size = LARGE_SEGMENT
            else:
                seg_size = ROUND_LARGE * math.ceil(size / ROUND_LARGE)
            if self.reserved + seg_size > self.capacity:
                self._release_cached()
                if self.reserved + seg_size > self.capacity:
                    return False
            seg = Segment(self.next_id, stream, small, seg_size)
            self.next_id += 1
            self.segments.append(seg)
            self.reserved += seg_size
            block = seg.blocks[0]
        self.block_of[a] = self._take(block, size)
        return True

    def free(self, a):
        block = self.block_of.pop(a)
        block.free = True
        seg = block.segment
        i = seg.blocks.index(block)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].free:   # absorb the free neighbours
            block.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].free:
            prev = seg.blocks[i - 1]
            prev.size += block.size
            seg.blocks.pop(i)

    def largest_free_block(self):
        return max((b.size for seg in self.segments for b in seg.blocks if b.free), default=0)

    def block_bytes(self, a):
        return self.block_of[a].size
