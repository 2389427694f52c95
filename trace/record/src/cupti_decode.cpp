#include "mhc/record/cupti_decode.hpp"

namespace mhc::record {

trace::CopyKind copy_kind(uint8_t k) {
    switch (k) {
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return trace::CopyKind::H2D;
        case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return trace::CopyKind::D2H;
        case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return trace::CopyKind::H2H;
        case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return trace::CopyKind::P2P;
        default: return trace::CopyKind::D2D;   // DTOD, ATOA, ATOD, DTOA, unknown
    }
}

namespace {

void decode_kernel(const CUpti_ActivityKernel10& k, Translator& t) {
    KernelEvent e;
    e.name = k.name ? k.name : "";
    e.start = k.start;
    e.end = k.end;
    e.device = k.deviceId;
    e.stream = k.streamId;
    e.correlation = k.correlationId;
    e.grid[0] = k.gridX, e.grid[1] = k.gridY, e.grid[2] = k.gridZ;
    e.block[0] = k.blockX, e.block[1] = k.blockY, e.block[2] = k.blockZ;
    e.shared_mem = k.staticSharedMemory + k.dynamicSharedMemory;
    e.registers = k.registersPerThread;
    t.on_kernel(e);
}

void decode_memory(const CUpti_ActivityMemory4& m, Translator& t) {
    switch (m.memoryKind) {
        case CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE:
        case CUPTI_ACTIVITY_MEMORY_KIND_PINNED:
            t.on_host_memory();
            return;
        default: break;
    }
    bool pool = m.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    const bool alloc = m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    // The pool's size when this allocation or release was made: the only figure of a pool's
    // reserved memory between its MEMORY_POOL records (created, trimmed, destroyed).
    if (m.memoryPoolConfig.memoryPoolType == CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL &&
        (alloc || m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)) {
        PoolEvent p;
        p.op = PoolEvent::Sampled;
        p.device = m.deviceId;
        p.address = m.memoryPoolConfig.address;
        p.size = m.memoryPoolConfig.pool.size;
        p.utilized = m.memoryPoolConfig.utilizedSize;
        p.t = m.timestamp;
        p.bytes = alloc ? m.bytes : 0;
        t.on_pool(p);
    }
    if (alloc) {
        AllocEvent e;
        e.address = m.address;
        e.bytes = m.bytes;
        e.t = e.t_enter = m.timestamp;
        e.device = m.deviceId;
        e.stream = m.streamId != CUPTI_INVALID_STREAM_ID ? m.streamId : 0;   // not async: no stream
        e.source = AllocSource::Activity;
        e.pool = pool;
        e.correlation = m.correlationId;
        switch (m.memoryKind) {
            case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: e.api = "memory:managed"; break;
            case CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC:
                e.api = "memory:static";
                e.static_memory = true;
                break;
            case CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC:
                e.api = "memory:managed-static";
                e.static_memory = true;
                break;
            default: e.api = pool ? "memory:pool" : "memory:device"; break;
        }
        t.on_alloc(e);
    } else if (m.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        FreeEvent e;
        e.address = m.address;
        e.t = m.timestamp;
        e.device = m.deviceId;
        e.source = AllocSource::Activity;
        e.correlation = m.correlationId;
        if (m.isAsync && m.streamId != CUPTI_INVALID_STREAM_ID) e.stream = m.streamId;
        t.on_free(e);
    }
}

}  // namespace

bool decode_record(const CUpti_Activity* r, Translator& t) {
    switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
            decode_kernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(r), t);
            return true;
        case CUPTI_ACTIVITY_KIND_MEMORY2:
            decode_memory(*reinterpret_cast<const CUpti_ActivityMemory4*>(r), t);
            return true;
        case CUPTI_ACTIVITY_KIND_MEMORY_POOL: {
            const auto& p = *reinterpret_cast<const CUpti_ActivityMemoryPool3*>(r);
            PoolEvent e;
            e.op = static_cast<uint32_t>(p.memoryPoolOperationType);
            e.device = p.deviceId;
            e.address = p.address;
            e.size = p.size;
            e.utilized = p.utilizedSize;
            e.t = p.timestamp;
            e.local = p.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED;
            t.on_pool(e);
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const auto& c = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
            t.on_copy({copy_kind(c.copyKind), c.bytes, c.start, c.end, c.deviceId, c.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY2: {
            const auto& c = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(r);
            t.on_copy({trace::CopyKind::P2P, c.bytes, c.start, c.end, c.deviceId, c.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const auto& s = *reinterpret_cast<const CUpti_ActivityMemset4*>(r);
            t.on_copy({trace::CopyKind::Memset, s.bytes, s.start, s.end, s.deviceId, s.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const auto& s = *reinterpret_cast<const CUpti_ActivitySynchronization2*>(r);
            t.on_sync({static_cast<uint32_t>(s.type), s.start, s.end, s.streamId});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_MARKER: {
            const auto& m = *reinterpret_cast<const CUpti_ActivityMarker2*>(r);
            MarkerEvent e;
            e.id = m.id;
            e.t = m.timestamp;
            e.name = m.name ? m.name : "";
            if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) e.phase = MarkerEvent::Phase::End;
            else if (m.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) e.phase = MarkerEvent::Phase::Start;
            else e.phase = MarkerEvent::Phase::Instant;
            // Sync-object markers (acquire/release) are not ranges of the program.
            if (m.flags & (CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE |
                           CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE_SUCCESS |
                           CUPTI_ACTIVITY_FLAG_MARKER_SYNC_ACQUIRE_FAILED |
                           CUPTI_ACTIVITY_FLAG_MARKER_SYNC_RELEASE))
                return true;
            t.on_marker(e);
            return true;
        }
        case CUPTI_ACTIVITY_KIND_OVERHEAD: {
            const auto& o = *reinterpret_cast<const CUpti_ActivityOverhead3*>(r);
            t.on_overhead({static_cast<uint32_t>(o.overheadKind), o.start, o.end});
            return true;
        }
        case CUPTI_ACTIVITY_KIND_DEVICE: {
            const auto& d = *reinterpret_cast<const CUpti_ActivityDevice5*>(r);
            t.on_device({d.id, d.name ? d.name : "", d.globalMemorySize,
                         d.computeCapabilityMajor, d.computeCapabilityMinor,
                         d.numMultiprocessors});
            return true;
        }
        default: return false;
    }
}

}  // namespace mhc::record
